// Command genops writes unary_ops.go from tinymlir.h (internal/genops). Run from
// bindings/go through `go generate ./...`.
package main

import (
	"fmt"
	"os"

	"tinymlir.dev/tinymlir/internal/genops"
)

func main() {
	header, err := os.ReadFile("../../capi/include/tinymlir/tinymlir.h")
	if err == nil {
		var source []byte
		if source, err = genops.Generate(header); err == nil {
			err = os.WriteFile("unary_ops.go", source, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genops:", err)
		os.Exit(1)
	}
}
