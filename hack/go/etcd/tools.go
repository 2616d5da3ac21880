//go:build tools

// Package tools pins etcd's server module so that `go build go.etcd.io/etcd/server/v3` builds
// the etcd binary at the version in go.mod.
package tools

import _ "go.etcd.io/etcd/server/v3"
