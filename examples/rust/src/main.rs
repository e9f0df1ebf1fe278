//! Generates a continuation of a prompt with kjv-tiny, a small GPT-2 trained on the King
//! James Bible.
//!
//!     cargo run --release -- "In the beginning God created"
//!     cargo run --release -- --tokens 60 --temperature 0.8 --top-k 40 --seed 1 "Blessed are"
//!     cargo run --release -- --model /path/to/gpt2 "Alan Turing theorized that"

use std::path::PathBuf;
use std::process::ExitCode;

use tinymlir::{Context, GenerateOptions, Model};

const USAGE: &str = "usage: tinymlir-generate [--model DIR] [--tokens N] [--temperature T] \
                     [--top-k K] [--seed S] PROMPT...";

struct Args {
    model: PathBuf,
    prompt: String,
    options: GenerateOptions,
}

fn parse_args() -> Result<Args, String> {
    // The repository's kjv-tiny, unless --model or TINYMLIR_MODEL says otherwise.
    let default_model = std::env::var_os("TINYMLIR_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/kjv-tiny"));
    let mut args = Args { model: default_model, prompt: String::new(), options: GenerateOptions::default() };
    args.options.max_new_tokens = 40;
    let mut words = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let number =
            |text: String, name: &str| text.parse::<f64>().map_err(|_| format!("bad {name}: {text}"));
        match arg.as_str() {
            "--model" => args.model = PathBuf::from(value("--model")?),
            "--tokens" => args.options.max_new_tokens = number(value("--tokens")?, "--tokens")? as usize,
            "--temperature" => {
                args.options.temperature = number(value("--temperature")?, "--temperature")? as f32
            }
            "--top-k" => args.options.top_k = number(value("--top-k")?, "--top-k")? as usize,
            "--seed" => args.options.seed = number(value("--seed")?, "--seed")? as u64,
            "-h" | "--help" => return Err(USAGE.to_string()),
            _ => words.push(arg),
        }
    }
    if words.is_empty() {
        return Err(USAGE.to_string());
    }
    args.prompt = words.join(" ");
    Ok(args)
}

fn run(args: &Args) -> tinymlir::Result<String> {
    let ctx = Context::new()?;
    let model = Model::load(&ctx, &args.model)?;
    let prompt = model.tokenize(&args.prompt)?;
    // Leave room in the model's context window for the prompt.
    let mut options = args.options;
    options.max_new_tokens = options.max_new_tokens.min(model.info()?.n_ctx.saturating_sub(prompt.len()));
    let ids = model.generate(&prompt, &options, None)?;
    model.detokenize_lossy(&ids)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(continuation) => {
            println!("{}{}", args.prompt, continuation);
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("tinymlir-generate: {err}");
            ExitCode::FAILURE
        }
    }
}
