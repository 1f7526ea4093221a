// Package validate checks the deployment artefacts under deploy/ offline:
// the Dockerfile and its build-context ignore file, docker-compose.yml with
// its env example, the Kubernetes manifests and their kustomization, and the
// systemd unit with its env example. Everything is in the tests:
//
//	cd deploy/validate && go vet ./... && go test ./...
//
// It is a module of its own so that its dependencies (Kubernetes API types,
// compose-go, BuildKit's Dockerfile parser and linter, kustomize) stay out of
// marlowe-follower's own go.mod.
//
// The checks read cmd/marlowe-follower/config/config.go to learn the real
// MARLOWE_RT_* environment variables, so that a renamed setting breaks the
// build of the artefacts here instead of silently doing nothing in
// production.
package validate
