// Command generate continues a prompt with kjv-tiny, a small GPT-2 trained on the King
// James Bible, through the tinymlir Go bindings.
//
//	go run . "In the beginning God created"
//	go run . -tokens 60 -temperature 0.8 -top-k 40 -seed 1 "Blessed are"
//	go run . -model /path/to/gpt2 "Alan Turing theorized that"
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"tinymlir.dev/tinymlir"
)

func main() {
	// The repository's kjv-tiny (this folder is examples/go), unless -model says otherwise.
	model := flag.String("model", filepath.Join("..", "..", "models", "kjv-tiny"), "GPT-2 folder in Hugging Face layout")
	tokens := flag.Int("tokens", 40, "tokens to generate")
	temperature := flag.Float64("temperature", 0, "0 = greedy; > 0 samples")
	topK := flag.Int("top-k", 0, "sample from the k most likely tokens (0 = all)")
	seed := flag.Uint64("seed", 0, "random seed for sampling")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: generate [flags] PROMPT...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	prompt := strings.Join(flag.Args(), " ")

	opts := tinymlir.DefaultGenerateOptions()
	opts.MaxNewTokens, opts.Temperature, opts.TopK, opts.Seed = *tokens, float32(*temperature), *topK, *seed
	text, err := generate(*model, prompt, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "generate: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(prompt + text)
}

func generate(dir, prompt string, opts tinymlir.GenerateOptions) (string, error) {
	ctx, err := tinymlir.NewContext()
	if err != nil {
		return "", err
	}
	defer ctx.Close()
	model, err := tinymlir.LoadModel(ctx, dir, nil) // nil: the default options (CPU)
	if err != nil {
		return "", err
	}
	defer model.Close()
	ids, err := model.Tokenize(prompt)
	if err != nil {
		return "", err
	}
	// Leave room in the model's context window for the prompt.
	info, err := model.Info()
	if err != nil {
		return "", err
	}
	if room := info.NCtx - len(ids); opts.MaxNewTokens > room {
		opts.MaxNewTokens = room
	}
	out, err := model.Generate(ids, &opts, nil)
	if err != nil {
		return "", err
	}
	text, err := model.Detokenize(out)
	return string(text), err
}
