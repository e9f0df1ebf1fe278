module tinymlir.dev/examples/generate

go 1.19

require tinymlir.dev/tinymlir v0.0.0

// The bindings from this repository, not a download.
replace tinymlir.dev/tinymlir => ../../bindings/go
