package notify

import "time"

// Record is a notification as operators see it: its log entry, the
// event's type, when the entry was made and last changed, and each
// delivery attempt, oldest first.
type Record struct {
	Entry
	EventType string
	CreatedAt time.Time
	UpdatedAt time.Time
	History   []AttemptRecord
}

// AttemptRecord is one attempt to notify an event.
type AttemptRecord struct {
	Attempt int
	Channel string
	// Topic is the topic the record was read from: the main topic or one
	// of its retry topics.
	Topic   string
	Outcome string
	Error   string
	At      time.Time
}
