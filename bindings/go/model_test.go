package tinymlir

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Free-running greedy ids are compared up to the first step whose top-1/top-2 logit margin
// is below this: there float rounding may legitimately pick the other token. Every token,
// that one and those after it included, is checked by TestEveryGoldenTokenUnderTeacherForcing.
const minMargin = 0.01

type goldenCase struct {
	Prompt    string    `json:"prompt"`
	PromptIDs []int32   `json:"prompt_ids"`
	GreedyIDs []int32   `json:"greedy_ids"`
	Margins   []float64 `json:"margins"`
	// Hugging Face's top-5 ids and logits for the first steps.
	FirstStepsTop5 []struct {
		IDs    []int32   `json:"ids"`
		Logits []float64 `json:"logits"`
	} `json:"first_steps_top5"`
}

// exact is how many leading greedy ids must match in free-running generation.
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

// tinyA is tests/data/tiny-a (a GPT-2 without tokenizer files): TINYMLIR_TEST_DATA_DIR (set
// by CTest), else the repository's tests/data/.
func tinyA() string {
	dir := os.Getenv("TINYMLIR_TEST_DATA_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "tests", "data")
	}
	return filepath.Join(dir, "tiny-a")
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
	model := must[*Model](t)(LoadModel(ctx, filepath.Join(modelsDir(), "kjv-tiny"), nil))
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
	if stats.ProgramsCompiled+stats.ProgramsFromDisk == 0 || stats.DecodeTokens == 0 {
		t.Errorf("stats %+v", stats)
	}
}

// logitTolerance is one logit's tolerance against Hugging Face's, as
// tests/model/gpt2_golden_test.cpp (tests/data/README.md): 1e-4 relative, with an absolute
// floor of 1e-4.
func logitTolerance(x float64) float64 {
	return 1e-4 * math.Max(1, math.Abs(x))
}

// Every golden token, teacher-forced: the logits after the prompt and the golden's own tokens
// before each step. The argmax is the golden token where its margin is >= minMargin; below,
// the golden token is in our top 2 and at most two logits' error behind our top 1. At every
// step its lead over every other token is the golden margin within two logits' error (plus
// the golden's rounding to 5 decimals), and first_steps_top5's logits are within one.
func TestEveryGoldenTokenUnderTeacherForcing(t *testing.T) {
	_, model := loadKJV(t)
	checked, total := 0, 0
	for _, c := range goldenCases(t) {
		if len(c.Margins) != len(c.GreedyIDs) {
			t.Fatalf("prompt %q: %d margins for %d greedy ids", c.Prompt, len(c.Margins), len(c.GreedyIDs))
		}
		total += len(c.GreedyIDs)
		ids := append([]int32(nil), c.PromptIDs...)
		for i, want := range c.GreedyIDs {
			logits := must[[]float32](t)(model.Logits(ids))
			first, second := -1, -1 // our top two
			other := math.Inf(-1)   // our largest logit of a token other than want
			for tok, v := range logits {
				if first < 0 || v > logits[first] {
					first, second = tok, first
				} else if second < 0 || v > logits[second] {
					second = tok
				}
				if tok != int(want) {
					other = math.Max(other, float64(v))
				}
			}
			at := fmt.Sprintf("prompt %q step %d (golden margin %.5f)", c.Prompt, i, c.Margins[i])
			top1, golden := float64(logits[first]), float64(logits[want])
			if c.Margins[i] >= minMargin {
				if first != int(want) {
					t.Errorf("%s: argmax %d, golden %d", at, first, want)
				}
			} else {
				if first != int(want) && second != int(want) {
					t.Errorf("%s: golden %d not in our top 2 (%d, %d)", at, want, first, second)
				}
				if behind := top1 - golden; behind > 2*logitTolerance(top1) {
					t.Errorf("%s: golden token %g behind our top 1", at, behind)
				}
			}
			if lead := golden - other; math.Abs(lead-c.Margins[i]) > 2*logitTolerance(top1)+5e-6 {
				t.Errorf("%s: golden token's lead %g", at, lead)
			}
			if i < len(c.FirstStepsTop5) {
				step := c.FirstStepsTop5[i]
				for r, tok := range step.IDs {
					if got := float64(logits[tok]); math.Abs(got-step.Logits[r]) > logitTolerance(step.Logits[r]) {
						t.Errorf("%s: logit of %d is %g, Hugging Face's %g", at, tok, got, step.Logits[r])
					}
				}
			}
			checked++
			ids = append(ids, want)
		}
	}
	if checked != total || total != 4*32 {
		t.Errorf("%d golden tokens checked of %d (want 4 x 32)", checked, total)
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
	// Long pieces and long texts: sized by the library's answer, not by a guess.
	dashes := strings.Repeat("-", 256)
	ids := must[[]int32](t)(model.Tokenize(dashes))
	if text := must[[]byte](t)(model.Detokenize(ids)); string(text) != dashes || 8*len(ids) >= len(dashes) {
		t.Errorf("dashes: %d ids -> %q", len(ids), text)
	}
	long := strings.Repeat("And God said, Let there be light: and there was light. ", 40)
	if text := must[[]byte](t)(model.Detokenize(must[[]int32](t)(model.Tokenize(long)))); string(text) != long {
		t.Errorf("long text: %q", text)
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

func TestCallbackTrueStopsAfterThatToken(t *testing.T) {
	_, model := loadKJV(t)
	c := goldenCases(t)[0]
	opts := DefaultGenerateOptions()
	opts.MaxNewTokens = 10
	// One meaning in every binding: true stops after this token (which is kept).
	var seen []int32
	ids := must[[]int32](t)(model.Generate(c.PromptIDs, &opts, func(token int32) bool {
		seen = append(seen, token)
		return len(seen) == 4
	}))
	if !equal(ids, seen) || len(ids) != 4 || !equal(ids[:min(4, c.exact())], c.GreedyIDs[:min(4, c.exact())]) {
		t.Errorf("ids %v, seen %v, golden %v", ids, seen, c.GreedyIDs[:4])
	}
	if ids := must[[]int32](t)(model.Generate(c.PromptIDs, &opts, func(int32) bool { return true })); len(ids) != 1 {
		t.Errorf("stop at once: %v", ids)
	}
	if ids := must[[]int32](t)(model.Generate(c.PromptIDs, &opts, func(int32) bool { return false })); len(ids) != 10 {
		t.Errorf("never stop: %v", ids)
	}
}

func TestBusyModel(t *testing.T) {
	_, model := loadKJV(t)
	prompt := goldenCases(t)[0].PromptIDs
	opts := DefaultGenerateOptions()
	opts.MaxNewTokens = 5
	one := DefaultGenerateOptions()
	one.MaxNewTokens = 1
	// Re-entering the model from its own Generate callback: the library answers busy at
	// once (no deadlock, nothing changed); the tokenizer and Info are always available.
	var errs []error
	ids := must[[]int32](t)(model.Generate(prompt, &opts, func(token int32) bool {
		errs = append(errs, errOf(model.Logits(prompt)), errOf(model.Generate(prompt, &one, nil)),
			errOf(model.Stats()), errOf(model.Detokenize([]int32{token})), errOf(model.Info()))
		return true
	}))
	if len(ids) != 1 || len(errs) != 5 {
		t.Fatalf("ids %v, errors %v", ids, errs)
	}
	for _, err := range errs[:3] {
		e := wantStatus(t, err, StatusBusy)
		if !strings.HasPrefix(e.Error(), "TM_ERROR_BUSY: ") {
			t.Errorf("Error() = %q", e.Error())
		}
	}
	for _, err := range errs[3:] {
		check(t, err)
	}
	must[[]float32](t)(model.Logits(prompt)) // free again

	// From another goroutine while a generation runs: busy too, never a wait.
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := model.Generate(prompt, &opts, func(int32) bool {
			close(started)
			<-release
			return true
		})
		done <- err
	}()
	<-started
	wantStatus(t, errOf(model.Logits(prompt)), StatusBusy)
	close(release)
	check(t, <-done)
}

func TestClosingAModelFromItsCallbackWaitsForTheCall(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	model := must[*Model](t)(LoadModel(ctx, tinyA(), nil))
	opts := DefaultGenerateOptions()
	opts.MaxNewTokens = 4
	ids := must[[]int32](t)(model.Generate([]int32{1, 2, 3}, &opts, func(int32) bool {
		check(t, model.Close()) // frees the model once Generate has returned
		return false
	}))
	if len(ids) != 4 {
		t.Errorf("%v", ids)
	}
	wantStatus(t, errOf(model.Logits([]int32{1})), StatusInvalidArgument)
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

// runtime.Goexit in the callback (t.FailNow) ends the goroutine that called Generate, and
// the model stays usable: it unwound through the library's frames, which never returned,
// and the model answered StatusBusy for good.
func TestGoexitInCallbackEndsTheCallerAndLeavesTheModelUsable(t *testing.T) {
	_, model := loadKJV(t)
	prompt := goldenCases(t)[0].PromptIDs
	opts := DefaultGenerateOptions()
	opts.MaxNewTokens = 10
	calls, returned := 0, false
	done := make(chan struct{})
	go func() {
		defer close(done)
		model.Generate(prompt, &opts, func(int32) bool {
			calls++
			runtime.Goexit()
			return false
		})
		returned = true
	}()
	<-done
	if returned || calls != 1 {
		t.Errorf("Generate returned: %v; the callback ran %d times", returned, calls)
	}
	if ids := must[[]int32](t)(model.Generate(prompt, &opts, nil)); len(ids) != 10 {
		t.Errorf("%d ids", len(ids))
	}
}

// Counts beyond what the model or the C API takes are errors before anything is sized by
// them: MaxNewTokens of 1<<38 was the Go runtime's fatal out of memory, math.MaxInt64 a
// makeslice panic, and ints beyond int32 were cut to their low bits (an axis of 1<<32 was
// axis 0, TopK of 1<<32+1 was 1).
func TestHugeCountsAreErrors(t *testing.T) {
	ctx, model := loadKJV(t)
	prompt := goldenCases(t)[0].PromptIDs
	for _, tokens := range []int{1 << 31, 1 << 38, math.MaxInt64} {
		opts := DefaultGenerateOptions()
		opts.MaxNewTokens = tokens
		_, err := model.Generate(prompt, &opts, nil)
		if err == nil {
			t.Fatalf("MaxNewTokens %d accepted", tokens)
		}
	}
	opts := DefaultGenerateOptions()
	opts.TopK = 1<<32 + 1
	if e := wantStatus(t, errOf(model.Generate(prompt, &opts, nil)), StatusOutOfRange); !strings.Contains(e.Message, "GenerateOptions.TopK is 4294967297") {
		t.Errorf("message %q", e.Message)
	}
	tr := must[*Trace](t)(NewTrace(ctx, "axes"))
	defer tr.Close()
	x := must[Value](t)(tr.Input(F32, 2, 3))
	wantStatus(t, errOf(tr.ReduceSum(x, 1<<32, false)), StatusOutOfRange)
	wantStatus(t, errOf(tr.Softmax(x, 1<<32)), StatusOutOfRange)
	wantStatus(t, errOf(tr.Concat([]Value{x, x}, 1<<32)), StatusOutOfRange)
	compile := DefaultCompileOptions()
	compile.OptLevel = 1 << 32
	y := must[Value](t)(tr.Neg(x))
	check(t, tr.End(y))
	wantStatus(t, errOf(ctx.Compile(tr, &compile)), StatusOutOfRange)
}

func TestAModelOutlivesItsContext(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	model := must[*Model](t)(LoadModel(ctx, tinyA(), nil))
	check(t, ctx.Close()) // the model keeps its own reference
	opts := DefaultGenerateOptions()
	opts.MaxNewTokens = 3
	if out := must[[]int32](t)(model.Generate([]int32{1, 2, 3}, &opts, nil)); len(out) != 3 {
		t.Fatalf("%v", out)
	}
	if logits := must[[]float32](t)(model.Logits([]int32{1, 2})); len(logits) != must[ModelInfo](t)(model.Info()).VocabSize {
		t.Fatalf("%d logits", len(logits))
	}
	check(t, model.Close())
	check(t, model.Close())
	wantStatus(t, errOf(model.Info()), StatusInvalidArgument)
	wantStatus(t, errOf(LoadModel(ctx, tinyA(), nil)), StatusInvalidArgument) // closed context
	_, err := LoadModel(must[*Context](t)(NewContext()), "/nonexistent/model", nil)
	wantStatus(t, err, StatusIO)
}

func TestModelOptionsPassTheTarget(t *testing.T) {
	ctx := must[*Context](t)(NewContext())
	defer ctx.Close()
	if DefaultModelOptions().Target != CPU {
		t.Errorf("default target %v", DefaultModelOptions().Target)
	}
	// The GPU target loads everywhere; generating needs a CUDA driver and a GPU, and says so
	// clearly where there is none (CI).
	gpu := must[*Model](t)(LoadModel(ctx, tinyA(), &ModelOptions{Target: GPU}))
	opts := DefaultGenerateOptions()
	opts.MaxNewTokens = 4
	if ids, err := gpu.Generate([]int32{1, 2, 3}, &opts, nil); err == nil {
		if fmt.Sprint(ids) != "[19 407 371 380]" {
			t.Errorf("GPU tokens %v", ids)
		}
	} else {
		wantStatus(t, err, StatusUnsupported)
		if !strings.Contains(err.Error(), "CUDA") {
			t.Errorf("the error does not name CUDA: %v", err)
		}
	}
	check(t, gpu.Close())
	model := must[*Model](t)(LoadModel(ctx, tinyA(), &ModelOptions{Target: CPU}))
	want := must[[]float32](t)(model.Logits([]int32{1, 2, 3}))
	check(t, model.Close())
	// The weight matrices held in F16: the random model's logits move by ~4.5e-4 of the
	// largest (the C++ test measures it).
	half := must[*Model](t)(LoadModel(ctx, tinyA(), &ModelOptions{Target: CPU, Weights: F16}))
	got := must[[]float32](t)(half.Logits([]int32{1, 2, 3}))
	check(t, half.Close())
	worst, scale := 0.0, 0.0
	for i := range want {
		worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
		scale = math.Max(scale, math.Abs(float64(want[i])))
	}
	if worst == 0 || worst > 2e-3*scale {
		t.Errorf("F16 weights moved the logits by %v (largest %v)", worst, scale)
	}
	// q8_0 (8-bit blocks): ~1% of the largest logit on this random model.
	q8 := must[*Model](t)(LoadModel(ctx, tinyA(), &ModelOptions{Target: CPU, Weights: Q8_0}))
	got = must[[]float32](t)(q8.Logits([]int32{1, 2, 3}))
	check(t, q8.Close())
	worst = 0.0
	for i := range want {
		worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
	}
	if worst == 0 || worst > 3e-2*scale {
		t.Errorf("q8_0 weights moved the logits by %v (largest %v)", worst, scale)
	}
	_, err := LoadModel(ctx, tinyA(), &ModelOptions{Target: GPU, Weights: Q8_0})
	wantStatus(t, err, StatusUnsupported)
}

// Score's log-probabilities are the log-softmax, in float64, of the logits of each prefix
// (Logits: the last-position program) within 1e-4.
func TestScoreIsTheLogSoftmaxOfEachPrefix(t *testing.T) {
	_, model := loadKJV(t)
	c := goldenCases(t)[0]
	ids := append(append([]int32(nil), c.PromptIDs...), c.GreedyIDs[:8]...)
	logprobs := must[[]float64](t)(model.Score(ids))
	if len(logprobs) != len(ids)-1 {
		t.Fatalf("%d log-probabilities for %d ids", len(logprobs), len(ids))
	}
	for i, got := range logprobs {
		logits := must[[]float32](t)(model.Logits(ids[:i+1]))
		top := math.Inf(-1)
		for _, v := range logits {
			top = math.Max(top, float64(v))
		}
		sum := 0.0
		for _, v := range logits {
			sum += math.Exp(float64(v) - top)
		}
		want := float64(logits[ids[i+1]]) - top - math.Log(sum)
		if math.Abs(got-want) > 1e-4 {
			t.Errorf("position %d: %v against %v", i, got, want)
		}
	}
	if got := must[[]float64](t)(model.Score(ids[:1])); len(got) != 0 {
		t.Errorf("one token scored %v", got)
	}
	if _, err := model.Score(nil); err == nil {
		t.Error("no ids: no error")
	}
}

func TestABatchGivesEachPromptItsTokensAlone(t *testing.T) {
	_, model := loadKJV(t)
	var prompts [][]int32
	for _, p := range []string{"And", "In the beginning God created", "Thou shalt", "The LORD is my shepherd; I shall not want."} {
		prompts = append(prompts, must[[]int32](t)(model.Tokenize(p)))
	}
	var options []GenerateOptions
	for i := range prompts {
		o := DefaultGenerateOptions()
		o.MaxNewTokens = 6 + 3*i
		if i%2 == 1 {
			o.Temperature, o.TopK, o.Seed = 0.8, 40, uint64(11+i)
		}
		options = append(options, o)
	}
	seen := make([][]int32, len(prompts))
	outs := must[[][]int32](t)(model.GenerateBatch(prompts, options, func(sequence int, token int32) bool {
		seen[sequence] = append(seen[sequence], token)
		return false
	}))
	for i, out := range outs {
		alone := must[[]int32](t)(model.Generate(prompts[i], &options[i], nil))
		if !equal(out, alone) || !equal(out, seen[i]) {
			t.Errorf("prompt %d: batch %v, alone %v, callback %v", i, out, alone, seen[i])
		}
	}
	if _, err := model.GenerateBatch(prompts, options[:1], nil); err == nil {
		t.Error("one options entry for four prompts was accepted")
	}
	_, err := model.GenerateBatch([][]int32{prompts[0], {}}, options[:2], nil)
	if err == nil || !strings.Contains(err.Error(), "sequence 1: the prompt is empty") {
		t.Errorf("an empty prompt: %v", err)
	}
	if MaxBatchSequences != 16 {
		t.Errorf("MaxBatchSequences is %d", MaxBatchSequences)
	}
}
