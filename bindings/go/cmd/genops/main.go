// Command genops writes unary_ops.go from tinymlir.h and table_ops.go from ops.h
// (internal/genops). Run from bindings/go through `go generate ./...`.
package main

import (
	"fmt"
	"os"

	"tinymlir.dev/tinymlir/internal/genops"
)

func write(header, out string, generate func([]byte) ([]byte, error)) error {
	text, err := os.ReadFile(header)
	if err != nil {
		return err
	}
	source, err := generate(text)
	if err != nil {
		return err
	}
	return os.WriteFile(out, source, 0o644)
}

func main() {
	err := write("../../capi/include/tinymlir/tinymlir.h", "unary_ops.go", genops.Generate)
	if err == nil {
		err = write("../../capi/include/tinymlir/ops.h", "table_ops.go", genops.GenerateTableOps)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genops:", err)
		os.Exit(1)
	}
}
