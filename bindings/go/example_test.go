package tinymlir_test

import (
	"fmt"

	"tinymlir.dev/tinymlir"
)

// The README's example: (x * g + b) * 0.5, traced, fused into one loop and run on Go slices.
// Errors are left out for brevity; each call returns one.
func Example() {
	ctx, _ := tinymlir.NewContext()
	defer ctx.Close()
	t, _ := tinymlir.NewTrace(ctx, "affine")
	x, _ := t.Input(tinymlir.F32, 2, 4)
	g, _ := t.Input(tinymlir.F32, 4)
	b, _ := t.Input(tinymlir.F32, 4)
	half, _ := t.Scalar(tinymlir.F32, 0.5)
	xg, _ := t.Mul(x, g)
	xgb, _ := t.Add(xg, b)
	y, _ := t.Mul(xgb, half)
	t.End(y)
	program, _ := ctx.Compile(t, nil)
	defer program.Close()
	ys := make([]float32, 8)
	err := program.Invoke(
		[]tinymlir.Tensor{tinymlir.NewTensor([]float32{1, 1, 1, 1, 2, 2, 2, 2}, 2, 4),
			tinymlir.NewTensor([]float32{1, 2, 3, 4}, 4), tinymlir.NewTensor([]float32{0, 0, 0, 0}, 4)},
		[]tinymlir.Tensor{tinymlir.NewTensor(ys, 2, 4)})
	fmt.Println(ys, err)
	// Output: [0.5 1 1.5 2 1 2 3 4] <nil>
}
