package admission

// The backlog's statements, for the test that reads its plan.
const (
	PlanSQL     = planSQL
	SendableSQL = sendableSQL
)
