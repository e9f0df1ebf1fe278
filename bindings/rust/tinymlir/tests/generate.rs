//! GPT-2 through the safe API: kjv-tiny's greedy tokens against the Hugging Face golden,
//! tokenizer round trips, logits, and the token callback (stop, panic).

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use common::{models_dir, Json};
use tinymlir::{Context, GenerateOptions, Model, Target};

/// Greedy ids are compared up to the first step whose top-1/top-2 logit margin is below
/// this: there float rounding may legitimately pick the other token.
const MIN_MARGIN: f64 = 0.01;

struct Case {
    prompt: String,
    prompt_ids: Vec<i32>,
    greedy_ids: Vec<i32>,
    /// How many leading greedy ids must match exactly.
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
            Case {
                prompt: c.get("prompt").unwrap().str().to_string(),
                prompt_ids: c.get("prompt_ids").unwrap().ints(),
                exact: margins.iter().position(|&m| m < MIN_MARGIN).unwrap_or(greedy_ids.len()),
                greedy_ids,
            }
        })
        .collect()
}

fn load(ctx: &Context) -> Model<'_> {
    Model::load(ctx, models_dir().join("kjv-tiny"), Target::Cpu).expect("load kjv-tiny")
}

#[test]
fn greedy_generation_matches_the_golden() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let mut model = load(&ctx);
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
    assert!(stats.programs_compiled > 0 && stats.decode_tokens > 0, "{stats:?}");
    Ok(())
}

#[test]
fn tokenizer_round_trip_and_logits() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let mut model = load(&ctx);
    let case = &golden_cases()[0];
    assert_eq!(model.detokenize_lossy(&case.prompt_ids)?, case.prompt);
    assert_eq!(model.tokenize("")?, Vec::<i32>::new());
    let long = "And God said, Let there be light: and there was light. ".repeat(20);
    assert_eq!(model.detokenize(&model.tokenize(&long)?)?, long.as_bytes());
    // A few tokens of many bytes each: the first buffer is too small and is grown.
    let dashes = "-".repeat(256);
    let ids = model.tokenize(&dashes)?;
    assert!(ids.len() * 8 < dashes.len(), "{ids:?}");
    assert_eq!(model.detokenize(&ids)?, dashes.as_bytes());

    // The first greedy token is the argmax of the prompt's logits.
    let logits = model.logits(&case.prompt_ids)?;
    assert_eq!(logits.len(), model.info()?.vocab_size);
    let argmax = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap();
    assert_eq!(argmax as i32, case.greedy_ids[0]);

    assert_eq!(model.detokenize(&[60000]).unwrap_err().kind(), tinymlir::ErrorKind::OutOfRange);
    assert_eq!(model.logits(&[]).unwrap_err().kind(), tinymlir::ErrorKind::InvalidArgument);
    Ok(())
}

#[test]
fn callback_streams_and_stops() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let mut model = load(&ctx);
    let case = &golden_cases()[0];
    let options = GenerateOptions { max_new_tokens: 10, ..GenerateOptions::default() };

    let mut seen = Vec::new();
    let mut stop_after_four = |token: i32| {
        seen.push(token);
        seen.len() < 4
    };
    let ids = model.generate(&case.prompt_ids, &options, Some(&mut stop_after_four))?;
    assert_eq!(ids, seen);
    assert_eq!(ids.len(), 4);
    assert_eq!(ids[..case.exact.min(4)], case.greedy_ids[..case.exact.min(4)]);
    Ok(())
}

#[test]
fn panic_in_callback_stops_generation_and_resumes() -> tinymlir::Result<()> {
    let ctx = Context::new()?;
    let mut model = load(&ctx);
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
    let mut model = load(&ctx);
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
