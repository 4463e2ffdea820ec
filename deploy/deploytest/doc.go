// Package deploytest checks the suite's packaging and deployment artefacts —
// the Dockerfile and .dockerignore, docker-compose.yml with its database
// init script, and the kustomize base and overlays under deploy/k8s — with
// the tools that consume them: compose-go loads and validates the compose
// file as Docker Compose does, krusty builds every overlay as kubectl -k
// does, the Dockerfile's build step runs with the real Go toolchain on the
// context that .dockerignore leaves, and the init script runs on a real
// PostgreSQL. No container engine or cluster is needed.
//
// The package has tests only.
package deploytest
