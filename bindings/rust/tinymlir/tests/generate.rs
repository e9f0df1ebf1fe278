//! GPT-2 through the safe API: kjv-tiny's greedy tokens against the Hugging Face golden,
//! tokenizer round trips and size queries, logits, the token callback (true stops, panic),
//! a busy model, and a model outliving its context.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use common::{models_dir, test_data_dir, Json};
use tinymlir::{Context, DType, ErrorKind, GenerateOptions, Model, ModelOptions, Target};

/// Free-running greedy ids are compared up to the first step whose top-1/top-2 logit margin
/// is below this: there float rounding may legitimately pick the other token. Every token,
/// that one and those after it included, is checked by every_golden_token_under_teacher_forcing.
const MIN_MARGIN: f64 = 0.01;

struct Case {
    prompt: String,
    prompt_ids: Vec<i32>,
    greedy_ids: Vec<i32>,
    /// Hugging Face's top-1 minus top-2 logit at each step.
    margins: Vec<f64>,
    /// first_steps_top5: Hugging Face's top-5 ids and logits for the first steps.
    top5: Vec<(Vec<i32>, Vec<f64>)>,
    /// How many leading greedy ids must match exactly in free-running generation.
    exact: usize,
}

fn golden_cases() -> Vec<Case> {
    let path = models_dir().join("kjv-tiny/golden.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let golden = Json::parse(&text);
    // The golden holds a list of cases; older goldens had one case at the top level.
    let cases = match golden.get("cases") {
        Some(cases) => cases.arr().to_vec(),
        None => vec![golden.clone()],
    };
    cases
        .iter()
        .map(|c| {
            let margins: Vec<f64> = c.get("margins").unwrap().arr().iter().map(Json::num).collect();
            let greedy_ids = c.get("greedy_ids").unwrap().ints();
            let top5 = c
                .get("first_steps_top5")
                .unwrap()
                .arr()
                .iter()
                .map(|step| {
                    let logits = step.get("logits").unwrap().arr().iter().map(Json::num).collect();
                    (step.get("ids").unwrap().ints(), logits)
                })
                .collect();
            Case {
                prompt: c.get("prompt").unwrap().str().to_string(),
                prompt_ids: c.get("prompt_ids").unwrap().ints(),
                exact: margins.iter().position(|&m| m < MIN_MARGIN).unwrap_or(greedy_ids.len()),
                greedy_ids,
                margins,
                top5,
            }
        })
        .collect()
}

fn load(ctx: &Context) -> Model {
    Model::load(ctx, models_dir().join("kjv-tiny")).expect("load kjv-tiny")
}

#[test]
fn greedy_generation_matches_the_golden() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let model = load(&ctx);
    let info = model.info()?;
    assert_eq!((info.vocab_size, info.n_ctx, info.n_layer, info.n_embd), (50257, 256, 4, 128));

    let cases = golden_cases();
    assert!(!cases.is_empty());
    for case in &cases {
        assert_eq!(model.tokenize(&case.prompt)?, case.prompt_ids, "prompt {:?}", case.prompt);
        let options = GenerateOptions { max_new_tokens: case.greedy_ids.len(), ..GenerateOptions::default() };
        let ids = model.generate(&case.prompt_ids, &options, None)?;
        assert_eq!(ids.len(), case.greedy_ids.len());
        assert_eq!(ids[..case.exact], case.greedy_ids[..case.exact], "prompt {:?}", case.prompt);
    }

    // Without the KV cache (the whole prefix recomputed each step) the tokens are the same.
    let case = &cases[0];
    let options = GenerateOptions { max_new_tokens: 8, use_kv_cache: false, ..GenerateOptions::default() };
    let ids = model.generate(&case.prompt_ids, &options, None)?;
    assert_eq!(ids[..case.exact.min(8)], case.greedy_ids[..case.exact.min(8)]);

    let stats = model.stats()?;
    assert!(stats.programs_compiled + stats.programs_from_disk > 0 && stats.decode_tokens > 0, "{stats:?}");
    Ok(())
}

/// One logit's tolerance against Hugging Face's, as tests/model/gpt2_golden_test.cpp
/// (tests/data/README.md): 1e-4 relative, with an absolute floor of 1e-4.
fn logit_tolerance(x: f64) -> f64 {
    1e-4 * x.abs().max(1.0)
}

/// Every golden token, teacher-forced: the logits after the prompt and the golden's own tokens
/// before each step. The argmax is the golden token where its margin is >= MIN_MARGIN; below,
/// the golden token is in our top 2 and at most two logits' error behind our top 1. At every
/// step its lead over every other token is the golden margin within two logits' error (plus
/// the golden's rounding to 5 decimals), and first_steps_top5's logits are within one.
#[test]
fn every_golden_token_under_teacher_forcing() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let model = load(&ctx);
    let (mut checked, mut total) = (0usize, 0usize);
    for case in &golden_cases() {
        assert_eq!(case.margins.len(), case.greedy_ids.len(), "prompt {:?}", case.prompt);
        total += case.greedy_ids.len();
        let mut ids = case.prompt_ids.clone();
        for (i, &want) in case.greedy_ids.iter().enumerate() {
            let logits: Vec<f64> = model.logits(&ids)?.into_iter().map(f64::from).collect();
            let mut order: Vec<usize> = (0..logits.len()).collect();
            order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
            let (first, second, want_u) = (order[0], order[1], want as usize);
            let margin = case.margins[i];
            let at = format!("prompt {:?} step {i} (golden margin {margin:.5})", case.prompt);
            if margin >= MIN_MARGIN {
                assert_eq!(first, want_u, "{at}");
            } else {
                let behind = logits[first] - logits[want_u];
                assert!(want_u == first || want_u == second, "{at}: ours {first}, {second}");
                assert!(behind <= 2.0 * logit_tolerance(logits[first]), "{at}: {behind} behind");
            }
            let other = logits
                .iter()
                .enumerate()
                .filter(|&(t, _)| t != want_u)
                .map(|(_, &v)| v)
                .fold(f64::NEG_INFINITY, f64::max);
            let lead = logits[want_u] - other;
            assert!(
                (lead - margin).abs() <= 2.0 * logit_tolerance(logits[first]) + 5e-6,
                "{at}: lead {lead}"
            );
            if let Some((top_ids, top_logits)) = case.top5.get(i) {
                for (&t, &value) in top_ids.iter().zip(top_logits) {
                    let got = logits[t as usize];
                    assert!((got - value).abs() <= logit_tolerance(value), "{at}: id {t}: {got} vs {value}");
                }
            }
            checked += 1;
            ids.push(want);
        }
    }
    assert_eq!((checked, total), (4 * 32, 4 * 32));
    Ok(())
}

#[test]
fn tokenizer_round_trip_and_logits() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let model = load(&ctx);
    let case = &golden_cases()[0];
    assert_eq!(model.detokenize_lossy(&case.prompt_ids)?, case.prompt);
    assert_eq!(model.tokenize("")?, Vec::<i32>::new());
    let long = "And God said, Let there be light: and there was light. ".repeat(20);
    assert_eq!(model.detokenize(&model.tokenize(&long)?)?, long.as_bytes());
    // A few tokens of many bytes each: sized by the library's answer, not by a guess.
    let dashes = "-".repeat(256);
    let ids = model.tokenize(&dashes)?;
    assert!(ids.len() * 8 < dashes.len(), "{ids:?}");
    assert_eq!(model.detokenize(&ids)?, dashes.as_bytes());
    assert_eq!(model.detokenize(&[])?, b"");

    // The first greedy token is the argmax of the prompt's logits.
    let logits = model.logits(&case.prompt_ids)?;
    assert_eq!(logits.len(), model.info()?.vocab_size);
    let argmax = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap();
    assert_eq!(argmax as i32, case.greedy_ids[0]);

    assert_eq!(model.detokenize(&[60000]).unwrap_err().kind(), tinymlir::ErrorKind::OutOfRange);
    assert_eq!(model.logits(&[]).unwrap_err().kind(), tinymlir::ErrorKind::InvalidArgument);
    Ok(())
}

/// log softmax(logits)[token], in f64.
fn log_softmax_at(logits: &[f32], token: i32) -> f64 {
    let top = logits.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
    let sum: f64 = logits.iter().map(|&v| (f64::from(v) - top).exp()).sum();
    f64::from(logits[token as usize]) - top - sum.ln()
}

#[test]
fn score_is_the_log_softmax_of_each_prefix() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let model = load(&ctx);
    let case = &golden_cases()[0];
    let mut ids = case.prompt_ids.clone();
    ids.extend_from_slice(&case.greedy_ids[..8]);
    let logprobs = model.score(&ids)?;
    assert_eq!(logprobs.len(), ids.len() - 1);
    for (i, &got) in logprobs.iter().enumerate() {
        let want = log_softmax_at(&model.logits(&ids[..=i])?, ids[i + 1]);
        assert!((got - want).abs() <= 1e-4, "position {i}: {got} against {want}");
    }
    assert!(model.score(&ids[..1])?.is_empty());
    assert_eq!(model.score(&[]).unwrap_err().kind(), tinymlir::ErrorKind::InvalidArgument);
    assert_eq!(model.score(&[1, 60000]).unwrap_err().kind(), tinymlir::ErrorKind::OutOfRange);
    Ok(())
}

#[test]
fn callback_true_stops_after_that_token() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let model = load(&ctx);
    let case = &golden_cases()[0];
    let options = GenerateOptions { max_new_tokens: 10, ..GenerateOptions::default() };

    // One meaning in every binding: true stops after this token (which is kept).
    let mut seen = Vec::new();
    let mut stop_after_four = |token: i32| {
        seen.push(token);
        seen.len() == 4
    };
    let ids = model.generate(&case.prompt_ids, &options, Some(&mut stop_after_four))?;
    assert_eq!(ids, seen);
    assert_eq!(ids.len(), 4);
    assert_eq!(ids[..case.exact.min(4)], case.greedy_ids[..case.exact.min(4)]);

    let mut stop_at_once = |_token: i32| true;
    assert_eq!(model.generate(&case.prompt_ids, &options, Some(&mut stop_at_once))?.len(), 1);
    let mut go_on = |_token: i32| false;
    assert_eq!(model.generate(&case.prompt_ids, &options, Some(&mut go_on))?.len(), 10);
    Ok(())
}

#[test]
fn a_busy_model_says_so() -> tinymlir::Result<()> {
    // Re-entering the model from its own generate callback: the library answers Busy at
    // once (no deadlock, nothing changed); tokenizer and info are always available.
    let ctx = Context::new()?;
    let model = load(&ctx);
    let prompt = golden_cases()[0].prompt_ids.clone();
    let options = GenerateOptions { max_new_tokens: 5, ..GenerateOptions::default() };
    let mut inner = Vec::new();
    let mut reenter = |token: i32| {
        let once = GenerateOptions { max_new_tokens: 1, ..GenerateOptions::default() };
        inner.push(model.logits(&[1, 2]).map(|_| ()));
        inner.push(model.generate(&[1], &once, None).map(|_| ()));
        inner.push(model.stats().map(|_| ()));
        inner.push(model.detokenize(&[token]).map(|_| ()));
        inner.push(model.info().map(|_| ()));
        true
    };
    assert_eq!(model.generate(&prompt, &options, Some(&mut reenter))?.len(), 1);
    let kinds: Vec<_> = inner.iter().map(|r| r.as_ref().err().map(|e| e.kind())).collect();
    assert_eq!(kinds, [Some(ErrorKind::Busy), Some(ErrorKind::Busy), Some(ErrorKind::Busy), None, None]);
    let busy = inner[0].as_ref().unwrap_err();
    assert_eq!(busy.status(), 10); // TM_ERROR_BUSY
    assert!(busy.to_string().starts_with("TM_ERROR_BUSY: "), "{busy}");
    // Free again once the generation has returned.
    assert_eq!(model.logits(&prompt)?.len(), 50257);

    // From another thread, while a generation runs: Busy too (never a wait).
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let (model, prompt, options) = (&model, &prompt, &options);
    std::thread::scope(|s| {
        let generating = s.spawn(move || {
            let mut hold = |_token: i32| {
                started_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                true
            };
            model.generate(prompt, options, Some(&mut hold))
        });
        started_rx.recv().unwrap();
        assert_eq!(model.logits(prompt).unwrap_err().kind(), ErrorKind::Busy);
        release_tx.send(()).unwrap();
        assert_eq!(generating.join().unwrap().unwrap().len(), 1);
    });
    Ok(())
}

#[test]
fn a_model_outlives_its_context() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let model = Model::load_with(&ctx, test_data_dir().join("tiny-a"), &ModelOptions::default())?;
    drop(ctx); // the model keeps its own reference
    let options = GenerateOptions { max_new_tokens: 4, ..GenerateOptions::default() };
    assert_eq!(model.generate(&[1, 2, 3], &options, None)?.len(), 4);
    assert_eq!(model.logits(&[1, 2, 3])?.len(), model.info()?.vocab_size);
    // And it may move to another thread on its own.
    let ids = std::thread::spawn(move || model.generate(&[1, 2, 3], &options, None)).join().unwrap()?;
    assert_eq!(ids.len(), 4);
    Ok(())
}

// Token counts beyond the context are the library's clear error, not a buffer of
// max_new_tokens allocated first (i32::MAX asked for 8 GiB: an abort under a memory limit);
// beyond what the library takes, an error naming the option.
#[test]
fn huge_token_counts_are_errors_not_allocations() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let model = Model::load_with(&ctx, test_data_dir().join("tiny-a"), &ModelOptions::default())?;
    let options = GenerateOptions { max_new_tokens: i32::MAX as usize, ..GenerateOptions::default() };
    let err = model.generate(&[1, 2, 3], &options, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfRange, "{err}");
    assert!(err.to_string().contains("exceed the model's context"), "{err}");
    let options = GenerateOptions { top_k: 1 << 40, ..GenerateOptions::default() };
    let err = model.generate(&[1, 2, 3], &options, None).unwrap_err();
    assert!(err.to_string().contains("GenerateOptions::top_k is 1099511627776, more than"), "{err}");
    Ok(())
}

#[test]
fn model_options_pass_the_target() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let gpu = ModelOptions { target: Target::Gpu, ..ModelOptions::default() };
    // The GPU target loads everywhere; generating needs a CUDA driver and a GPU, and says so
    // clearly where there is none (CI).
    let model = Model::load_with(&ctx, test_data_dir().join("tiny-a"), &gpu)?;
    match model.generate(&[1, 2, 3], &GenerateOptions { max_new_tokens: 4, ..Default::default() }, None) {
        Ok(ids) => assert_eq!(ids, vec![19, 407, 371, 380]),
        Err(err) => {
            assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
            assert!(err.to_string().contains("CUDA"), "{err}");
        }
    }
    Ok(())
}

#[test]
fn model_options_pass_the_weights_dtype() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let tiny_a = test_data_dir().join("tiny-a");
    let f32_model = Model::load(&ctx, &tiny_a)?;
    let want = f32_model.logits(&[1, 2, 3])?;
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let half = ModelOptions { weights: Some(DType::F16), ..ModelOptions::default() };
    let got = Model::load_with(&ctx, &tiny_a, &half)?.logits(&[1, 2, 3])?;
    let worst = got.iter().zip(&want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    // F16 weights move the random model's logits by ~4.5e-4 of the largest (the C++ test).
    assert!(worst > 0.0 && worst <= 2e-3 * scale, "{worst} of {scale}");
    // q8_0 (8-bit blocks): ~1% of the largest logit on this random model.
    let q8 = ModelOptions { weights: Some(DType::Q8_0), ..ModelOptions::default() };
    let got = Model::load_with(&ctx, &tiny_a, &q8)?.logits(&[1, 2, 3])?;
    let worst = got.iter().zip(&want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(worst > 0.0 && worst <= 3e-2 * scale, "q8_0: {worst} of {scale}");
    let on_gpu = ModelOptions { target: Target::Gpu, weights: Some(DType::Q8_0) };
    let err = Model::load_with(&ctx, &tiny_a, &on_gpu).err().expect("q8_0 weights on the GPU");
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    Ok(())
}

#[test]
fn panic_in_callback_stops_generation_and_resumes() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let model = load(&ctx);
    let prompt = golden_cases()[0].prompt_ids.clone();
    let options = GenerateOptions { max_new_tokens: 10, ..GenerateOptions::default() };
    let mut calls = 0;
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut boom = |_token: i32| -> bool {
            calls += 1;
            panic!("boom from the callback");
        };
        model.generate(&prompt, &options, Some(&mut boom))
    }));
    let payload = result.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom from the callback"));
    assert_eq!(calls, 1, "generation went on after the panic");
    // The model is still usable afterwards.
    assert_eq!(model.generate(&prompt, &options, None)?.len(), 10);
    Ok(())
}

#[test]
fn sampling_is_reproducible_with_a_seed() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let model = load(&ctx);
    let prompt = model.tokenize("Blessed are")?;
    let options = GenerateOptions {
        max_new_tokens: 12,
        temperature: 0.8,
        top_k: 40,
        seed: 7,
        ..GenerateOptions::default()
    };
    assert_eq!(model.generate(&prompt, &options, None)?, model.generate(&prompt, &options, None)?);
    Ok(())
}

#[test]
fn a_batch_gives_each_prompt_its_tokens_alone() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let model = load(&ctx);
    let prompts: Vec<Vec<i32>> = ["And", "In the beginning God created", "Thou shalt", "The LORD is my shepherd; I shall not want."]
        .iter()
        .map(|p| model.tokenize(p))
        .collect::<tinymlir::Result<_>>()?;
    let options: Vec<GenerateOptions> = (0..prompts.len())
        .map(|i| GenerateOptions {
            max_new_tokens: 6 + 3 * i,
            temperature: if i % 2 == 1 { 0.8 } else { 0.0 },
            top_k: 40,
            seed: 11 + i as u64,
            ..GenerateOptions::default()
        })
        .collect();
    let slices: Vec<&[i32]> = prompts.iter().map(|p| p.as_slice()).collect();
    let mut seen = vec![Vec::new(); prompts.len()];
    let mut record = |sequence: usize, token: i32| {
        seen[sequence].push(token);
        false
    };
    let outs = model.generate_batch(&slices, &options, Some(&mut record))?;
    for (i, out) in outs.iter().enumerate() {
        assert_eq!(out, &model.generate(&prompts[i], &options[i], None)?, "prompt {i}");
        assert_eq!(out, &seen[i], "prompt {i}: the callback's tokens");
    }
    let err = model.generate_batch(&slices, &options[..1], None).unwrap_err();
    assert_eq!(err.kind(), tinymlir::ErrorKind::InvalidArgument);
    let empty: &[i32] = &[];
    let err = model.generate_batch(&[slices[0], empty], &options[..2], None).unwrap_err();
    assert_eq!(err.kind(), tinymlir::ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("sequence 1: the prompt is empty"), "{err}");
    Ok(())
}
