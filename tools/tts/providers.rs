//! Speech engines behind one interface. Local engines (espeak-ng, piper) run offline
//! as child processes fed on stdin; the keyed ones (OpenAI, ElevenLabs) are HTTPS
//! APIs; Edge runs the `edge-tts` command of the Python package of that name.

use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Seconds a synthesis may take before it is given up.
const SYNTHESIS_TIMEOUT: Duration = Duration::from_secs(120);
const MAX_AUDIO_BYTES: u64 = 64 * 1024 * 1024;

/// The `tts` section of config.yaml (`tts.provider`, `tts.<provider>.*`).
pub struct TtsConfig {
    pub section: Value,
}

impl TtsConfig {
    pub fn load(hermes_home: &Path) -> TtsConfig {
        let config = hermes_runtime::config::Config::load(hermes_home);
        TtsConfig {
            section: config.get("tts").cloned().unwrap_or(Value::Null),
        }
    }

    fn get(&self, provider: &str, key: &str) -> Option<String> {
        self.section
            .get(provider)?
            .get(key)?
            .as_str()
            .map(str::to_owned)
            .filter(|s| !s.is_empty())
    }

    pub fn provider_name(&self) -> Option<String> {
        self.section
            .get("provider")
            .and_then(Value::as_str)
            .map(|p| p.trim().to_lowercase())
            .filter(|p| !p.is_empty())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Espeak,
    Piper,
    Edge,
    OpenAi,
    ElevenLabs,
}

impl Provider {
    pub const ALL: [Provider; 5] = [
        Provider::Piper,
        Provider::Espeak,
        Provider::Edge,
        Provider::OpenAi,
        Provider::ElevenLabs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Provider::Espeak => "espeak",
            Provider::Piper => "piper",
            Provider::Edge => "edge",
            Provider::OpenAi => "openai",
            Provider::ElevenLabs => "elevenlabs",
        }
    }

    pub fn from_name(name: &str) -> Option<Provider> {
        match name {
            "espeak" | "espeak-ng" | "espeak_ng" => Some(Provider::Espeak),
            other => Provider::ALL.into_iter().find(|p| p.name() == other),
        }
    }

    /// Input characters the engine takes; longer text is cut.
    pub fn max_chars(self) -> usize {
        match self {
            Provider::Espeak => 20_000,
            Provider::Piper | Provider::Edge => 5_000,
            Provider::OpenAi => 4_096,
            Provider::ElevenLabs => 10_000,
        }
    }

    /// The audio format the engine writes by itself.
    pub fn native_extension(self) -> &'static str {
        match self {
            Provider::Espeak | Provider::Piper => "wav",
            Provider::Edge | Provider::OpenAi | Provider::ElevenLabs => "mp3",
        }
    }

    /// `Ok` when this engine can run here, else what it lacks.
    pub fn availability(self, config: &TtsConfig) -> Result<(), String> {
        match self {
            Provider::Espeak => find_program(&["espeak-ng", "espeak"])
                .map(|_| ())
                .ok_or_else(|| "espeak-ng is not installed".into()),
            Provider::Piper => {
                find_program(&["piper"]).ok_or("the piper command is not installed")?;
                let model = config
                    .get("piper", "model")
                    .ok_or("tts.piper.model (a .onnx voice file) is not configured")?;
                if Path::new(&model).is_file() {
                    Ok(())
                } else {
                    Err(format!("the piper voice {model} does not exist"))
                }
            }
            Provider::Edge => find_program(&["edge-tts"]).map(|_| ()).ok_or_else(|| {
                "the edge-tts command (pip package edge-tts) is not installed".into()
            }),
            Provider::OpenAi => key("OPENAI_API_KEY").map(|_| ()),
            Provider::ElevenLabs => key("ELEVENLABS_API_KEY").map(|_| ()),
        }
    }

    /// Writes speech for `text` to `path` in the engine's native format.
    pub fn synthesize(self, text: &str, path: &Path, config: &TtsConfig) -> Result<(), String> {
        match self {
            Provider::Espeak => {
                let program =
                    find_program(&["espeak-ng", "espeak"]).ok_or("espeak-ng is not installed")?;
                let mut args = vec![
                    "--stdin".to_string(),
                    "-w".to_string(),
                    path.display().to_string(),
                ];
                if let Some(voice) = config.get("espeak", "voice") {
                    args.extend(["-v".into(), voice]);
                }
                if let Some(speed) = config
                    .section
                    .get("espeak")
                    .and_then(|e| e.get("speed"))
                    .and_then(Value::as_u64)
                {
                    args.extend(["-s".into(), speed.clamp(80, 500).to_string()]);
                }
                run_with_stdin(&program, &args, text)
            }
            Provider::Piper => {
                let program =
                    find_program(&["piper"]).ok_or("the piper command is not installed")?;
                let model = config
                    .get("piper", "model")
                    .ok_or("tts.piper.model is not configured")?;
                let args = vec![
                    "--model".to_string(),
                    model,
                    "--output_file".to_string(),
                    path.display().to_string(),
                ];
                run_with_stdin(&program, &args, text)
            }
            Provider::Edge => {
                let program =
                    find_program(&["edge-tts"]).ok_or("the edge-tts command is not installed")?;
                let voice = config
                    .get("edge", "voice")
                    .unwrap_or_else(|| "en-US-AriaNeural".into());
                // `--text=` keeps text that starts with `-` from being read as an option.
                let args = vec![
                    "--voice".to_string(),
                    voice,
                    format!("--text={text}"),
                    "--write-media".to_string(),
                    path.display().to_string(),
                ];
                run_with_stdin(&program, &args, "")
            }
            Provider::OpenAi => {
                let api_key = key("OPENAI_API_KEY")?;
                let base = config
                    .get("openai", "base_url")
                    .unwrap_or_else(|| "https://api.openai.com/v1".into());
                let format = match path.extension().and_then(|e| e.to_str()) {
                    Some("ogg") | Some("opus") => "opus",
                    Some("wav") => "wav",
                    Some("flac") => "flac",
                    _ => "mp3",
                };
                let body = json!({
                    "model": config.get("openai", "model").unwrap_or_else(|| "gpt-4o-mini-tts".into()),
                    "voice": config.get("openai", "voice").unwrap_or_else(|| "alloy".into()),
                    "input": text,
                    "response_format": format,
                });
                let url = format!("{}/audio/speech", base.trim_end_matches('/'));
                let audio = post_for_audio(
                    &url,
                    &[("Authorization", format!("Bearer {api_key}"))],
                    &body,
                )?;
                std::fs::write(path, audio)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))
            }
            Provider::ElevenLabs => {
                let api_key = key("ELEVENLABS_API_KEY")?;
                let voice = config
                    .get("elevenlabs", "voice_id")
                    .unwrap_or_else(|| "pNInz6obpgDQGcFmaJgB".into());
                let format = if path.extension().is_some_and(|e| e == "ogg") {
                    "opus_48000_64"
                } else {
                    "mp3_44100_128"
                };
                let url = format!(
                    "https://api.elevenlabs.io/v1/text-to-speech/{voice}?output_format={format}"
                );
                let body = json!({
                    "text": text,
                    "model_id": config.get("elevenlabs", "model_id").unwrap_or_else(|| "eleven_multilingual_v2".into()),
                });
                let audio = post_for_audio(&url, &[("xi-api-key", api_key)], &body)?;
                std::fs::write(path, audio)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))
            }
        }
    }
}

fn key(name: &str) -> Result<String, String> {
    std::env::var(name)
        .ok()
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| format!("{name} is not set"))
}

/// The first of `names` found on PATH.
pub fn find_program(names: &[&str]) -> Option<PathBuf> {
    names.iter().find_map(|name| which::which(name).ok())
}

/// Runs `program args...` with `text` on stdin (never through a shell), bounded in time.
fn run_with_stdin(program: &Path, args: &[String], text: &str) -> Result<(), String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let text = text.to_string();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(text.as_bytes());
    });
    let deadline = std::time::Instant::now() + SYNTHESIS_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} took longer than {}s and was stopped",
                    program.display(),
                    SYNTHESIS_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for {} failed: {e}", program.display())),
        }
    };
    let _ = feeder.join();
    if status.success() {
        return Ok(());
    }
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    Err(format!(
        "{} failed ({status}): {}",
        program.display(),
        stderr.trim().chars().take(500).collect::<String>()
    ))
}

fn post_for_audio(url: &str, headers: &[(&str, String)], body: &Value) -> Result<Vec<u8>, String> {
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(SYNTHESIS_TIMEOUT))
        .http_status_as_error(false)
        .tls_config(hermes_runtime::tls_trust::tls_config())
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let mut request = agent.post(url);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let mut response = request
        .send_json(body)
        .map_err(|e| format!("POST {url} failed: {e}"))?;
    let status = response.status().as_u16();
    let bytes = response
        .body_mut()
        .with_config()
        .limit(MAX_AUDIO_BYTES)
        .read_to_vec()
        .map_err(|e| format!("cannot read the audio: {e}"))?;
    if !(200..300).contains(&status) {
        return Err(format!(
            "POST {url} answered {status}: {}",
            String::from_utf8_lossy(&bytes)
                .chars()
                .take(300)
                .collect::<String>()
        ));
    }
    Ok(bytes)
}

/// Converts `from` (any format the tools read) into `to`, chosen by its extension:
/// ffmpeg when installed, else sox. `Err` when neither can.
pub fn convert(from: &Path, to: &Path) -> Result<(), String> {
    let (program, args): (PathBuf, Vec<String>) = if let Some(ffmpeg) = find_program(&["ffmpeg"]) {
        (
            ffmpeg,
            vec![
                "-y".into(),
                "-loglevel".into(),
                "error".into(),
                "-i".into(),
                from.display().to_string(),
                to.display().to_string(),
            ],
        )
    } else if let Some(sox) = find_program(&["sox"]) {
        (
            sox,
            vec![from.display().to_string(), to.display().to_string()],
        )
    } else {
        return Err("neither ffmpeg nor sox is installed".into());
    };
    let out = Command::new(&program)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    if out.status.success() && to.is_file() {
        Ok(())
    } else {
        let _ = std::fs::remove_file(to);
        Err(format!(
            "{} could not convert: {}",
            program.display(),
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .chars()
                .take(300)
                .collect::<String>()
        ))
    }
}
