package tinymlir

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Greedy ids are compared up to the first step whose top-1/top-2 logit margin is below
// this: there float rounding may legitimately pick the other token.
const minMargin = 0.01

type goldenCase struct {
	Prompt    string    `json:"prompt"`
	PromptIDs []int32   `json:"prompt_ids"`
	GreedyIDs []int32   `json:"greedy_ids"`
	Margins   []float64 `json:"margins"`
}

// exact is how many leading greedy ids must match.
func (c goldenCase) exact() int {
	for i, m := range c.Margins {
		if m < minMargin {
			return i
		}
	}
	return len(c.GreedyIDs)
}

// modelsDir is TINYMLIR_MODELS_DIR (set by CTest), else the repository's models/.
func modelsDir() string {
	if dir := os.Getenv("TINYMLIR_MODELS_DIR"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "models")
}

func goldenCases(t *testing.T) []goldenCase {
	data, err := os.ReadFile(filepath.Join(modelsDir(), "kjv-tiny", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	// A list of cases; older goldens had one case at the top level.
	var golden struct {
		Cases []goldenCase `json:"cases"`
		goldenCase
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden.Cases) == 0 {
		golden.Cases = []goldenCase{golden.goldenCase}
	}
	return golden.Cases
}

func loadKJV(t *testing.T) (*Context, *Model) {
	ctx := must[*Context](t)(NewContext())
	model := must[*Model](t)(LoadModel(ctx, filepath.Join(modelsDir(), "kjv-tiny"), CPU))
	t.Cleanup(func() { model.Close(); ctx.Close() })
	return ctx, model
}

func TestGreedyGenerationMatchesTheGolden(t *testing.T) {
	_, model := loadKJV(t)
	info := must[ModelInfo](t)(model.Info())
	if info != (ModelInfo{VocabSize: 50257, NCtx: 256, NLayer: 4, NEmbd: 128}) {
		t.Fatalf("info %+v", info)
	}
	cases := goldenCases(t)
	for _, c := range cases {
		if ids := must[[]int32](t)(model.Tokenize(c.Prompt)); !equal(ids, c.PromptIDs) {
			t.Errorf("Tokenize(%q) = %v, want %v", c.Prompt, ids, c.PromptIDs)
		}
		opts := DefaultGenerateOptions()
		opts.MaxNewTokens = len(c.GreedyIDs)
		ids := must[[]int32](t)(model.Generate(c.PromptIDs, &opts, nil))
		if len(ids) != len(c.GreedyIDs) || !equal(ids[:c.exact()], c.GreedyIDs[:c.exact()]) {
			t.Errorf("prompt %q: got %v, want %v (first %d exact)", c.Prompt, ids, c.GreedyIDs, c.exact())
		}
	}
	// Without the KV cache (the whole prefix recomputed each step): the same tokens.
	c := cases[0]
	opts := DefaultGenerateOptions()
	opts.MaxNewTokens, opts.UseKVCache = 8, false
	ids := must[[]int32](t)(model.Generate(c.PromptIDs, &opts, nil))
	if n := min(8, c.exact()); !equal(ids[:n], c.GreedyIDs[:n]) {
		t.Errorf("without KV cache: %v, want %v", ids, c.GreedyIDs[:8])
	}
	stats := must[ModelStats](t)(model.Stats())
	if stats.ProgramsCompiled == 0 || stats.DecodeTokens == 0 {
		t.Errorf("stats %+v", stats)
	}
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func TestTokenizerAndLogits(t *testing.T) {
	_, model := loadKJV(t)
	c := goldenCases(t)[0]
	if text := must[[]byte](t)(model.Detokenize(c.PromptIDs)); string(text) != c.Prompt {
		t.Errorf("Detokenize = %q, want %q", text, c.Prompt)
	}
	if ids := must[[]int32](t)(model.Tokenize("")); len(ids) != 0 {
		t.Errorf("Tokenize(\"\") = %v", ids)
	}
	// Long pieces: the first buffer is too small and is grown.
	dashes := strings.Repeat("-", 256)
	ids := must[[]int32](t)(model.Tokenize(dashes))
	if text := must[[]byte](t)(model.Detokenize(ids)); string(text) != dashes || 8*len(ids) >= len(dashes) {
		t.Errorf("dashes: %d ids -> %q", len(ids), text)
	}
	logits := must[[]float32](t)(model.Logits(c.PromptIDs))
	best := 0
	for i := range logits {
		if logits[i] > logits[best] {
			best = i
		}
	}
	if int32(best) != c.GreedyIDs[0] {
		t.Errorf("argmax of logits %d, first greedy id %d", best, c.GreedyIDs[0])
	}
	wantStatus(t, errOf(model.Detokenize([]int32{60000})), StatusOutOfRange)
	wantStatus(t, errOf(model.Logits(nil)), StatusInvalidArgument)
}

func TestCallbackStreamsStopsAndCannotReenter(t *testing.T) {
	_, model := loadKJV(t)
	c := goldenCases(t)[0]
	opts := DefaultGenerateOptions()
	opts.MaxNewTokens = 10
	var seen []int32
	var reentry error
	ids := must[[]int32](t)(model.Generate(c.PromptIDs, &opts, func(token int32) bool {
		seen = append(seen, token)
		_, reentry = model.Tokenize("x") // the model is busy: an error, not a deadlock
		return len(seen) < 4
	}))
	if !equal(ids, seen) || len(ids) != 4 || !equal(ids[:min(4, c.exact())], c.GreedyIDs[:min(4, c.exact())]) {
		t.Errorf("ids %v, seen %v, golden %v", ids, seen, c.GreedyIDs[:4])
	}
	wantStatus(t, reentry, StatusInvalidArgument)
}

func TestPanicInCallbackStopsGenerationAndIsRaisedAgain(t *testing.T) {
	_, model := loadKJV(t)
	prompt := goldenCases(t)[0].PromptIDs
	opts := DefaultGenerateOptions()
	opts.MaxNewTokens = 10
	calls := 0
	func() {
		defer func() {
			if r := recover(); r != "boom from the callback" {
				t.Errorf("recovered %v", r)
			}
		}()
		model.Generate(prompt, &opts, func(int32) bool {
			calls++
			panic("boom from the callback")
		})
		t.Error("Generate returned normally")
	}()
	if calls != 1 {
		t.Errorf("callback ran %d times after panicking", calls)
	}
	// The model is still usable.
	if ids := must[[]int32](t)(model.Generate(prompt, &opts, nil)); len(ids) != 10 {
		t.Errorf("%d ids", len(ids))
	}
}

func TestContextOutlivesItsModels(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	model := must[*Model](t)(LoadModel(ctx, filepath.Join(modelsDir(), "kjv-tiny"), CPU))
	check(t, ctx.Close()) // destruction waits for the model
	ids := must[[]int32](t)(model.Tokenize("In the beginning"))
	opts := DefaultGenerateOptions()
	opts.MaxNewTokens = 3
	if out := must[[]int32](t)(model.Generate(ids, &opts, nil)); len(out) != 3 {
		t.Fatalf("%v", out)
	}
	check(t, model.Close())
	check(t, model.Close())
	wantStatus(t, errOf(model.Info()), StatusInvalidArgument)
	wantStatus(t, errOf(LoadModel(ctx, "x", CPU)), StatusInvalidArgument)
	_, err := LoadModel(must[*Context](t)(NewContext()), "/nonexistent/model", CPU)
	wantStatus(t, err, StatusIO)
}
