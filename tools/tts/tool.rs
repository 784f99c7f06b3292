//! `text_to_speech`: text to an audio file, by the engine config.yaml `tts.provider`
//! names, or by default the first local engine that can run (piper with a configured
//! voice, then espeak-ng), then Edge.

use hermes_runtime::prelude::*;
use std::path::PathBuf;

mod providers;

use providers::{Provider, TtsConfig};

/// The engine this installation uses: the configured one, else the first local one
/// that can run, else Edge. `Err` names a configured engine this build does not know.
fn resolve(config: &TtsConfig) -> Result<Provider, String> {
    if let Some(name) = config.provider_name() {
        return Provider::from_name(&name).ok_or_else(|| {
            let known: Vec<&str> = Provider::ALL.iter().map(|p| p.name()).collect();
            format!(
                "tts.provider '{name}' is not an engine of this runtime (known: {})",
                known.join(", ")
            )
        });
    }
    Ok([Provider::Piper, Provider::Espeak]
        .into_iter()
        .find(|p| p.availability(config).is_ok())
        .unwrap_or(Provider::Edge))
}

/// Available exactly when the engine that a call would use can run.
pub fn tts_available() -> bool {
    let home = hermes_runtime::context::default_hermes_home();
    let config = TtsConfig::load(&home);
    resolve(&config).is_ok_and(|p| p.availability(&config).is_ok())
}

fn fail(message: impl Into<String>) -> ToolResult {
    Ok(json!({"success": false, "error": message.into()}).into())
}

/// Turn text into speech and save it as an audio file. Returns the file's path and a `MEDIA:<path>` tag that chat platforms deliver as audio. The voice and the engine are set by the user in config.yaml (`tts.provider`: espeak, piper, edge, openai, elevenlabs), not chosen here. Long text is cut to the engine's limit (OpenAI 4096 characters, ElevenLabs 10000, Edge and piper 5000).
#[tool(toolset = "tts", emoji = "🔊", check = tts_available)]
pub fn text_to_speech(
    /// The text to speak.
    text: String,
    /// Where to save the audio (.wav, .mp3, .ogg, ...). Default: $HERMES_HOME/cache/audio/tts_<timestamp>.<ext>.
    output_path: Option<String>,
    ctx: &ToolContext,
) -> ToolResult {
    if text.trim().is_empty() {
        return fail("Text is required");
    }
    let config = TtsConfig::load(ctx.hermes_home());
    let provider = match resolve(&config) {
        Ok(provider) => provider,
        Err(e) => return fail(format!("TTS configuration error: {e}")),
    };
    if let Err(why) = provider.availability(&config) {
        return fail(format!(
            "TTS provider {} is not available: {why}",
            provider.name()
        ));
    }
    let text: String = text.chars().take(provider.max_chars()).collect();
    let access = match crate::file_access::policy(ctx) {
        Ok(access) => access,
        Err(e) => return fail(e),
    };
    let (target, access) = match output_path
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        Some(given) => {
            if std::path::Path::new(given)
                .components()
                .any(|c| c == std::path::Component::ParentDir)
            {
                return fail(format!(
                    "output_path contains a '..' component: {given}. Use a path without '..'."
                ));
            }
            let resolved = ctx.resolve_path(given);
            if crate::file_access::is_device_path(&resolved) {
                return fail(format!(
                    "Refusing to write {given}: it is a device or kernel file."
                ));
            }
            if resolved.is_dir() {
                return fail(format!("{given} is a folder; give a file path."));
            }
            // The same writable roots and protected places as every other write.
            match crate::file_access::grant_outside_roots(
                ctx,
                &access,
                &resolved,
                "text_to_speech",
                "Write",
                given,
            ) {
                Ok(widened) => (resolved, widened.map(std::sync::Arc::new).unwrap_or(access)),
                Err(refusal) => return fail(refusal),
            }
        }
        None => {
            let stamp = chrono::Local::now().format("%Y%m%d_%H%M%S_%3f");
            let audio = ctx.hermes_home().join("cache/audio");
            if let Err(e) = std::fs::create_dir_all(&audio) {
                return fail(format!("Cannot create {}: {e}", audio.display()));
            }
            let confined = std::sync::Arc::new(access.confined_to(&audio));
            (
                audio.join(format!("tts_{stamp}.{}", provider.native_extension())),
                confined,
            )
        }
    };
    // The engine writes into a private folder of the runtime; the audio is then moved
    // into place through the access policy, so no engine ever writes a path the model
    // named (nor follows a symlink planted there).
    let scratch = match private_scratch(ctx.hermes_home()) {
        Ok(dir) => dir,
        Err(e) => return fail(format!("Cannot prepare the audio: {e}")),
    };
    let made = synthesize_to(
        provider,
        &text,
        &scratch.join(target.file_name().unwrap_or_default()),
        &config,
    );
    let placed = made.and_then(|made| {
        let file = match made.extension() {
            Some(ext) => target.with_extension(ext),
            None => target.clone(),
        };
        let audio = std::fs::read(&made).map_err(|e| format!("cannot read the audio: {e}"))?;
        let shown = file.display().to_string();
        crate::file_access::write_file_bytes(&access, &file, &audio, true, "Write", &shown)
            .map_err(|e| e.to_string())?;
        Ok(file)
    });
    let _ = std::fs::remove_dir_all(&scratch);
    let file = match placed {
        Ok(file) => file,
        Err(e) => return fail(format!("TTS generation failed ({}): {e}", provider.name())),
    };
    let voice_compatible = file.extension().is_some_and(|e| e == "ogg");
    let path = file.display().to_string();
    let mut media_tag = format!("MEDIA:{path}");
    if voice_compatible {
        media_tag = format!("[[audio_as_voice]]\n{media_tag}");
    }
    Ok(json!({
        "success": true,
        "file_path": path,
        "media_tag": media_tag,
        "provider": provider.name(),
        "voice_compatible": voice_compatible,
    })
    .into())
}

/// A fresh folder only this process uses, under `$HERMES_HOME/cache/audio`.
fn private_scratch(hermes_home: &std::path::Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let base = hermes_home.join("cache/audio");
    std::fs::create_dir_all(&base)?;
    let dir = base.join(format!(
        ".engine-{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        chrono::Local::now()
            .timestamp_nanos_opt()
            .unwrap_or_default()
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

/// Synthesises in the engine's own format beside `target`, then converts when the
/// requested extension differs. Without a converter the native file is kept under
/// the target's name with the native extension, and that path is returned.
fn synthesize_to(
    provider: Provider,
    text: &str,
    target: &std::path::Path,
    config: &TtsConfig,
) -> Result<PathBuf, String> {
    let native = provider.native_extension();
    let wanted = target
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_lowercase);
    let keyed = matches!(provider, Provider::OpenAi | Provider::ElevenLabs);
    if wanted.as_deref() == Some(native) || (keyed && wanted.is_some()) {
        provider.synthesize(text, target, config)?;
        return check_written(target.to_path_buf());
    }
    let temp = target.with_file_name(format!(
        ".{}.hermes-tts-{}.{native}",
        target.file_stem().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let result = provider.synthesize(text, &temp, config).and_then(|_| {
        if wanted.is_none() {
            let file = target.with_extension(native);
            std::fs::rename(&temp, &file)
                .map_err(|e| format!("cannot move the audio into place: {e}"))?;
            return Ok(file);
        }
        match providers::convert(&temp, target) {
            Ok(()) => Ok(target.to_path_buf()),
            Err(_) => {
                let file = target.with_extension(native);
                std::fs::rename(&temp, &file)
                    .map_err(|e| format!("cannot move the audio into place: {e}"))?;
                Ok(file)
            }
        }
    });
    let _ = std::fs::remove_file(&temp);
    check_written(result?)
}

fn check_written(file: PathBuf) -> Result<PathBuf, String> {
    match std::fs::metadata(&file) {
        Ok(meta) if meta.len() > 0 => Ok(file),
        _ => Err(format!("the engine wrote no audio to {}", file.display())),
    }
}
