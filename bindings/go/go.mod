module tinymlir.dev/tinymlir

go 1.19
