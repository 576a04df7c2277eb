//! Fill-in-the-middle prompt templates, by model family.
//!
//! [`resolve`] turns the configured template (`auto` included) into a
//! concrete one; [`render`] lays a [`FimRequest`] out in it: the model's
//! sentinel tokens as text, the context snippets, and the stop sequences.
//! Beginning-of-sequence tokens (`<s>`, `<｜begin▁of▁sentence｜>`) are never
//! written: the server's tokenizer adds them.
//!
//! # Layouts, and where they come from
//!
//! `P` is the prefix, `S` the suffix, `C` the snippets labelled with path
//! comments (see [`snippet_header`]) followed by a label for the current file.
//!
//! | template | PSM | SPM |
//! | --- | --- | --- |
//! | `starcoder` | `<fim_prefix>P<fim_suffix>S<fim_middle>` | `<fim_prefix><fim_suffix>S<fim_middle>P` |
//! | `codellama` | `<PRE> CP <SUF>S <MID>` | `<PRE> <SUF>S <MID> CP` |
//! | `deepseek` | `<｜fim▁begin｜>CP<｜fim▁hole｜>S<｜fim▁end｜>` | as PSM |
//! | `qwen` | `<\|fim_prefix\|>P<\|fim_suffix\|>S<\|fim_middle\|>` | as PSM |
//! | `codestral` | `[SUFFIX]S[PREFIX] CP` | as PSM |
//! | `codegemma` | `<\|fim_prefix\|>CP<\|fim_suffix\|>S<\|fim_middle\|>` | as PSM |
//! | `granite` | `<fim_prefix>CP<fim_suffix>S<fim_middle>` | as PSM |
//!
//! - StarCoder/StarCoder2: tokens from the StarCoder2 vocabulary (checked in
//!   llama.cpp's `ggml-vocab-starcoder.gguf`). SPM is "variant 2" of
//!   Bavarian et al. (2022), the one BigCode's Megatron-LM trains
//!   (`[prefix_tok, suffix_tok] suffix [middle_tok] prefix middle`), not
//!   `<fim_suffix>S<fim_prefix>P<fim_middle>`. With snippets or a repository
//!   name it uses StarCoder2's repository format (StarCoder 2 paper, §5):
//!   `<repo_name>R<file_sep>path\ncode<file_sep>…<file_sep><fim_prefix>path\nP…`;
//!   the current file's path is part of the prefix, as in training. StarCoder 1,
//!   SantaCoder and stable-code have the FIM tokens but not `<repo_name>` or
//!   `<file_sep>`, which they read as plain text.
//! - Code Llama: `generation.py` of meta-llama/codellama
//!   (`infilling_prompt_tokens`): PSM `<PRE> {pre} <SUF>{suf} <MID>`, SPM
//!   `<PRE> <SUF>{suf} <MID> {pre}`. The spaces stand for SentencePiece's
//!   leading-space handling when the prompt is tokenized as text.
//! - DeepSeek-Coder (and Coder-V2): tokens checked in llama.cpp's
//!   `ggml-vocab-deepseek-coder.gguf` (fullwidth `｜` U+FF5C, `▁` U+2581);
//!   PSM only, the mode the DeepSeek-Coder paper settles on.
//! - Qwen2.5-Coder / Qwen3-Coder: file-level and repository-level forms from
//!   the Qwen2.5-Coder technical report (figure 4):
//!   `<|repo_name|>R\n<|file_sep|>path\ncode\n…<|file_sep|>path\n<|fim_prefix|>P…`.
//!   PSM only.
//! - Codestral (22B, tokenizer v3): mistral-common's `encode_fim` yields
//!   `<s>[SUFFIX]suffix[PREFIX]▁prefix` (the prefix gets SentencePiece's
//!   leading space, hence the space after `[PREFIX]`; Ollama's template is the
//!   same). Natively suffix-first, so PSM and SPM render alike.
//! - CodeGemma: tokens from Google's CodeGemma prompt-structure page; its
//!   SPM layout is not published, so PSM only. Granite 4 models use the same
//!   `<|fim_…|>` tokens (third-party configurations; no IBM page found), so
//!   [`resolve`] gives them this template.
//! - Granite Code / Granite 3.x: StarCoder-1-style tokenizer (`<fim_prefix>`,
//!   `<fim_suffix>`, `<fim_middle>`, `<reponame>`, `<filename>`, no
//!   `<file_sep>`); PSM only (IBM documents no SPM layout).
//!
//! Templates without a repository-level form prepend the snippets to the
//! prefix, each as a path comment in the snippet's language and its text,
//! separated by blank lines, then a path comment for the current file. They
//! stay inside the prefix region even in SPM (Code Llama, Codestral), where
//! the model expects file text; for the repository-level forms they come
//! first. Without snippets the current file is not labelled.
//!
//! `chat` asks a chat model to fill a hole marker ([`hole_marker`]);
//! `suffix` leaves the layout to the server ([`FimPrompt::Split`]); `none` is
//! the prefix alone, for models without FIM: among them SmolLM/SmolLM2, the
//! embedded default, whose vocabulary has `<repo_name>` and `<file_sep>` but
//! no FIM tokens.
use crate::config::{FimTemplate, Provider};
use crate::model::{FimRequest, Message, Snippet};

/// Where the suffix goes relative to the prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FimOrder {
    /// prefix, suffix, middle: the usual layout.
    Psm,
    /// suffix first, then prefix: typing only appends to the prompt's end,
    /// so a KV cache keeps everything but the newest characters.
    Spm,
}

/// A rendered FIM prompt, in the shape the template needs.
#[derive(Clone, Debug, PartialEq)]
pub enum FimPrompt {
    /// One prompt string with the template's special tokens as text.
    Text(String),
    /// Prompt and suffix sent separately; the server lays them out
    /// (`fim_template = "suffix"`, Ollama's `suffix`, Codestral's endpoint).
    Split { prompt: String, suffix: String },
    /// For models without FIM: a chat asking to fill the hole.
    Chat(Vec<Message>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct RenderedFim {
    pub prompt: FimPrompt,
    /// The template's stop sequences followed by the request's own.
    pub stop: Vec<String>,
}

/// The hole marker the `chat` template puts at the cursor (a numbered
/// variant when the code already contains it; see [`hole_marker`]).
pub const HOLE_MARKER: &str = "{{FILL_HERE}}";

/// The concrete template for a model: `configured` unless it is `auto`, in
/// which case it is chosen from the model name (and the provider).
///
/// `auto`: Anthropic always gets `chat` (no raw completions); Mistral gets
/// `suffix` for Codestral models (its `/fim/completions` lays the prompt out
/// itself) and `chat` for the rest. Otherwise [`template_for_model`] decides
/// from the name, and when it does not know the model: `local` → `none` (the
/// embedded SmolLM2 has no FIM tokens), `openai` → `chat`, `ollama` and
/// `llamacpp` → `suffix` (the server knows the model's template).
pub fn resolve(configured: FimTemplate, provider: Provider, model_name: &str) -> FimTemplate {
    if configured != FimTemplate::Auto {
        return configured;
    }
    match provider {
        Provider::Anthropic => FimTemplate::Chat,
        Provider::Mistral if model_name.to_ascii_lowercase().contains("codestral") => {
            FimTemplate::Suffix
        }
        Provider::Mistral => FimTemplate::Chat,
        Provider::Local | Provider::OpenAi | Provider::Ollama | Provider::LlamaCpp => {
            template_for_model(model_name).unwrap_or(match provider {
                Provider::Local => FimTemplate::None,
                Provider::Ollama | Provider::LlamaCpp => FimTemplate::Suffix,
                _ => FimTemplate::Chat,
            })
        }
    }
}

/// The template a model family was trained with, recognised from the model
/// name (case-insensitive substrings, most specific first); `None` when the
/// name says nothing. Generic DeepSeek and Qwen names (chat models) need
/// "coder" too.
pub fn template_for_model(model_name: &str) -> Option<FimTemplate> {
    let name = model_name.to_ascii_lowercase();
    let has = |needle: &str| name.contains(needle);
    let template = if has("codestral") {
        FimTemplate::Codestral
    } else if has("codegemma") {
        FimTemplate::CodeGemma
    } else if has("codellama") || has("code-llama") || has("code_llama") {
        FimTemplate::CodeLlama
    } else if has("deepseek") && has("coder") {
        FimTemplate::DeepSeek
    } else if has("qwen") && has("coder") {
        FimTemplate::Qwen
    } else if has("starcoder") || has("santacoder") || has("stable-code") || has("stablecode") {
        FimTemplate::StarCoder
    } else if has("smollm") {
        FimTemplate::None
    } else if has("granite4") || has("granite-4") {
        FimTemplate::CodeGemma
    } else if has("granite") {
        FimTemplate::Granite
    } else {
        return None;
    };
    Some(template)
}

// DeepSeek-Coder's sentinels: `｜` is U+FF5C FULLWIDTH VERTICAL LINE and `▁`
// U+2581 LOWER ONE EIGHTH BLOCK, not `|` and `_`.
const DEEPSEEK_BEGIN: &str = "<\u{ff5c}fim\u{2581}begin\u{ff5c}>";
const DEEPSEEK_HOLE: &str = "<\u{ff5c}fim\u{2581}hole\u{ff5c}>";
const DEEPSEEK_END: &str = "<\u{ff5c}fim\u{2581}end\u{ff5c}>";
const DEEPSEEK_EOS: &str = "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>";

/// The stop sequences a template brings (its sentinel and end tokens).
pub fn stop_sequences(template: FimTemplate) -> &'static [&'static str] {
    match template {
        FimTemplate::StarCoder => &[
            "<|endoftext|>",
            "<fim_prefix>",
            "<fim_suffix>",
            "<fim_middle>",
            "<fim_pad>",
            "<file_sep>",
            "<repo_name>",
            "<|im_end|>",
        ],
        FimTemplate::CodeLlama => &["<EOT>", "</s>", "<PRE>", "<SUF>", "<MID>"],
        FimTemplate::DeepSeek => &[
            DEEPSEEK_EOS,
            DEEPSEEK_BEGIN,
            DEEPSEEK_HOLE,
            DEEPSEEK_END,
            "<|EOT|>",
        ],
        FimTemplate::Qwen => &[
            "<|endoftext|>",
            "<|fim_prefix|>",
            "<|fim_suffix|>",
            "<|fim_middle|>",
            "<|fim_pad|>",
            "<|file_sep|>",
            "<|repo_name|>",
            "<|im_end|>",
        ],
        FimTemplate::Codestral => &["</s>", "[INST]", "[PREFIX]", "[SUFFIX]", "[MIDDLE]"],
        FimTemplate::CodeGemma => &[
            "<|file_separator|>",
            "<|fim_prefix|>",
            "<|fim_suffix|>",
            "<|fim_middle|>",
            "<eos>",
            "<end_of_turn>",
            "<|end_of_text|>",
        ],
        FimTemplate::Granite => &[
            "<|endoftext|>",
            "<|end_of_text|>",
            "<fim_prefix>",
            "<fim_suffix>",
            "<fim_middle>",
            "<fim_pad>",
            "<reponame>",
            "<filename>",
        ],
        FimTemplate::Auto | FimTemplate::Chat | FimTemplate::Suffix | FimTemplate::None => &[],
    }
}

/// Whether `render(template, _, FimOrder::Spm)` uses a suffix-first layout
/// the model family was trained with, ending the prompt with the prefix.
/// The others render SPM requests as PSM (`none` ends with the prefix
/// anyway).
pub fn supports_spm(template: FimTemplate) -> bool {
    matches!(
        template,
        FimTemplate::StarCoder | FimTemplate::CodeLlama | FimTemplate::Codestral
    )
}

/// Renders `req` (prefix, suffix, snippets, path) with `template`.
pub fn render(template: FimTemplate, req: &FimRequest, order: FimOrder) -> RenderedFim {
    let template = match template {
        FimTemplate::Auto => resolve(FimTemplate::Auto, Provider::OpenAi, ""),
        t => t,
    };
    let spm = order == FimOrder::Spm && supports_spm(template);
    let s = req.suffix.as_str();
    let prompt = match template {
        FimTemplate::StarCoder => FimPrompt::Text(starcoder(req, spm)),
        FimTemplate::CodeLlama => {
            let cp = labelled_prefix(req);
            FimPrompt::Text(if spm {
                format!("<PRE> <SUF>{s} <MID> {cp}")
            } else {
                format!("<PRE> {cp} <SUF>{s} <MID>")
            })
        }
        FimTemplate::DeepSeek => FimPrompt::Text(format!(
            "{DEEPSEEK_BEGIN}{}{DEEPSEEK_HOLE}{s}{DEEPSEEK_END}",
            labelled_prefix(req)
        )),
        FimTemplate::Qwen => FimPrompt::Text(qwen(req)),
        FimTemplate::Codestral => {
            FimPrompt::Text(format!("[SUFFIX]{s}[PREFIX] {}", labelled_prefix(req)))
        }
        FimTemplate::CodeGemma => FimPrompt::Text(format!(
            "<|fim_prefix|>{}<|fim_suffix|>{s}<|fim_middle|>",
            labelled_prefix(req)
        )),
        FimTemplate::Granite => FimPrompt::Text(format!(
            "<fim_prefix>{}<fim_suffix>{s}<fim_middle>",
            labelled_prefix(req)
        )),
        FimTemplate::Chat => FimPrompt::Chat(chat(req)),
        FimTemplate::Suffix => FimPrompt::Split {
            prompt: labelled_prefix(req),
            suffix: s.to_string(),
        },
        FimTemplate::None | FimTemplate::Auto => FimPrompt::Text(labelled_prefix(req)),
    };
    RenderedFim {
        prompt,
        stop: merge_stops(stop_sequences(template), &req.options.stop),
    }
}

/// The template's stops, then the request's, without repeats or empties.
fn merge_stops(template: &[&str], extra: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(template.len() + extra.len());
    for stop in template
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
    {
        if !stop.is_empty() && !out.iter().any(|s| s == stop) {
            out.push(stop.to_string());
        }
    }
    out
}

/// StarCoder: file-level, or StarCoder2's repository format when there is
/// repository context.
fn starcoder(req: &FimRequest, spm: bool) -> String {
    let (p, s) = (req.prefix.as_str(), req.suffix.as_str());
    let mut out = String::new();
    let repo_level = req.repo_name.is_some() || !req.snippets.is_empty();
    let mut head = String::new();
    if repo_level {
        if let Some(repo) = &req.repo_name {
            out.push_str("<repo_name>");
            out.push_str(repo);
        }
        for snippet in &req.snippets {
            out.push_str("<file_sep>");
            out.push_str(&snippet.path);
            out.push('\n');
            push_with_newline(&mut out, &snippet.text);
        }
        out.push_str("<file_sep>");
        if let Some(path) = &req.path {
            head = format!("{path}\n");
        }
    }
    if spm {
        out.push_str(&format!("<fim_prefix><fim_suffix>{s}<fim_middle>{head}{p}"));
    } else {
        out.push_str(&format!("<fim_prefix>{head}{p}<fim_suffix>{s}<fim_middle>"));
    }
    out
}

/// Qwen2.5-Coder: file-level, or the repository-level form when there is
/// repository context.
fn qwen(req: &FimRequest) -> String {
    let mut out = String::new();
    if req.repo_name.is_some() || !req.snippets.is_empty() {
        if let Some(repo) = &req.repo_name {
            out.push_str(&format!("<|repo_name|>{repo}\n"));
        }
        for snippet in &req.snippets {
            out.push_str(&format!("<|file_sep|>{}\n", snippet.path));
            push_with_newline(&mut out, &snippet.text);
        }
        out.push_str("<|file_sep|>");
        if let Some(path) = &req.path {
            out.push_str(path);
            out.push('\n');
        }
    }
    out.push_str(&format!(
        "<|fim_prefix|>{}<|fim_suffix|>{}<|fim_middle|>",
        req.prefix, req.suffix
    ));
    out
}

/// `text`, then a newline unless it already ends with one.
fn push_with_newline(out: &mut String, text: &str) {
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

/// The snippets as path comments and text, then a path comment for the
/// current file, then the prefix; the bare prefix when there are no
/// snippets.
fn labelled_prefix(req: &FimRequest) -> String {
    if req.snippets.is_empty() {
        return req.prefix.clone();
    }
    let mut out = snippet_block(&req.snippets);
    if let Some(path) = &req.path {
        out.push_str(&snippet_header(path));
        out.push('\n');
    }
    out.push_str(&req.prefix);
    out
}

/// Line-comment delimiters for a file, chosen by its extension (or name):
/// `("//", "")`, `("#", "")`, `("--", "")`, `("<!--", " -->")`, … `//` when
/// the extension is unknown.
pub fn comment_syntax(path: &str) -> (&'static str, &'static str) {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        "makefile" | "gnumakefile" | "dockerfile" | "containerfile" | "cmakelists.txt"
        | "gemfile" | "rakefile" | "justfile" | "vagrantfile" | "build" | "workspace"
        | ".gitignore" | ".dockerignore" | ".env" => return ("#", ""),
        _ => {}
    }
    let ext = match lower.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext,
        _ => "",
    };
    match ext {
        "py" | "pyi" | "pyw" | "rb" | "sh" | "bash" | "zsh" | "fish" | "toml" | "yaml" | "yml"
        | "r" | "pl" | "pm" | "ps1" | "psm1" | "nix" | "ex" | "exs" | "jl" | "tf" | "hcl"
        | "cmake" | "mk" | "nim" | "cr" | "coffee" | "conf" | "cfg" | "gd" | "bzl" | "star"
        | "awk" | "tcl" | "dockerfile" | "mojo" => ("#", ""),
        "lua" | "sql" | "hs" | "lhs" | "elm" | "ada" | "adb" | "ads" | "vhd" | "vhdl" | "purs"
        | "agda" | "dhall" => ("--", ""),
        "html" | "htm" | "xhtml" | "xml" | "svg" | "vue" | "svelte" | "md" | "markdown"
        | "xaml" | "csproj" | "plist" => ("<!--", " -->"),
        "css" => ("/*", " */"),
        "clj" | "cljs" | "cljc" | "edn" | "el" | "lisp" | "lsp" | "scm" | "ss" | "rkt" | "asm"
        | "s" | "ini" => (";", ""),
        "erl" | "hrl" | "tex" | "sty" | "cls" | "bib" | "pro" => ("%", ""),
        "ml" | "mli" | "fs" | "fsi" | "sml" | "pas" => ("(*", " *)"),
        "vim" => ("\"", ""),
        "bat" | "cmd" => ("REM", ""),
        _ => ("//", ""),
    }
}

/// The comment line that labels a snippet from `path`, in that file's
/// comment syntax: `// Path: src/a.rs`, `# Path: a.py`, `<!-- Path: a.html -->`.
pub fn snippet_header(path: &str) -> String {
    let (open, close) = comment_syntax(path);
    format!("{open} Path: {path}{close}")
}

/// A hole marker that occurs nowhere in the request's text: [`HOLE_MARKER`],
/// or `{{FILL_HERE_2}}`, `{{FILL_HERE_3}}`, … when the code contains it.
pub fn hole_marker(req: &FimRequest) -> String {
    let taken = |m: &str| {
        req.prefix.contains(m)
            || req.suffix.contains(m)
            || req.snippets.iter().any(|s| s.text.contains(m))
    };
    if !taken(HOLE_MARKER) {
        return HOLE_MARKER.to_string();
    }
    (2u32..)
        .map(|n| format!("{{{{FILL_HERE_{n}}}}}"))
        .find(|m| !taken(m))
        .unwrap_or_else(|| HOLE_MARKER.to_string())
}

/// The `chat` template's system message, for the hole `marker`.
fn chat_system(marker: &str) -> String {
    format!(
        "You are a code completion engine inside an editor. You are shown a \
         file with one hole in it, marked {marker}. Reply with exactly the text \
         that belongs in the hole and nothing else: no explanations, no \
         Markdown code fences, no repetition of the code before or after the \
         hole. What you write is inserted at the hole exactly as it is, so \
         keep the file's indentation and style. If the hole needs nothing, \
         reply with nothing."
    )
}

/// The `chat` template: a system message with the rules and a user message
/// with the snippets and the file, the hole marked.
fn chat(req: &FimRequest) -> Vec<Message> {
    let marker = hole_marker(req);
    let system = chat_system(&marker);
    let mut user = String::new();
    if let Some(repo) = &req.repo_name {
        user.push_str(&format!("Repository: {repo}\n\n"));
    }
    if !req.snippets.is_empty() {
        user.push_str("Code from other files, for reference:\n\n");
        for snippet in &req.snippets {
            push_file_block(&mut user, &snippet.path, &snippet.text);
            user.push('\n');
        }
    }
    let path = req.path.as_deref().unwrap_or("untitled");
    user.push_str(&format!(
        "The file to complete, with the hole marked {marker}:\n\n"
    ));
    push_file_block(
        &mut user,
        path,
        &format!("{}{marker}{}", req.prefix, req.suffix),
    );
    user.push_str(&format!(
        "\nReply with only the text that replaces {marker}."
    ));
    vec![Message::system(system), Message::user(user)]
}

/// `<file path="…">` block around `text`.
fn push_file_block(out: &mut String, path: &str, text: &str) {
    out.push_str(&format!("<file path=\"{path}\">\n"));
    push_with_newline(out, text);
    out.push_str("</file>\n");
}

/// Snippets as the comment-labelled templates write them: for each, its
/// [`snippet_header`], its text (ending with a newline) and a blank line.
pub fn snippet_block(snippets: &[Snippet]) -> String {
    let mut out = String::new();
    for snippet in snippets {
        out.push_str(&snippet_header(&snippet.path));
        out.push('\n');
        push_with_newline(&mut out, &snippet.text);
        out.push('\n');
    }
    out
}
