//! text_to_speech through the binary with the offline engine (espeak-ng, installed by
//! .ci/setup.d/40-tts.sh): real audio files whose duration sox measures. The keyed
//! engines (OpenAI, ElevenLabs) and Edge need the network, which this machine does not
//! have: only their availability checks and refusals are tested here.

mod binary;

use binary::{call, hermes};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

fn duration_seconds(file: &Path) -> f64 {
    let out = Command::new("soxi")
        .arg("-D")
        .arg(file)
        .output()
        .expect("soxi (sox) is installed by .ci/setup.d/40-tts.sh");
    assert!(
        out.status.success(),
        "soxi cannot read {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn the_local_engine_writes_a_real_wav_under_hermes_home() {
    let home = tempfile::tempdir().unwrap();
    let result = call(
        home.path(),
        "text_to_speech",
        &json!({"text": "The build passed. All tests are green."}),
        &[],
    );
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["provider"], "espeak");
    let file = Path::new(result["file_path"].as_str().unwrap()).to_path_buf();
    assert!(
        file.starts_with(home.path().join("cache/audio")),
        "{}",
        file.display()
    );
    assert_eq!(file.extension().unwrap(), "wav");
    assert_eq!(result["media_tag"], format!("MEDIA:{}", file.display()));
    assert!(
        duration_seconds(&file) > 0.5,
        "the audio is too short to hold the sentence"
    );
}

#[test]
fn an_output_path_is_honoured_and_converted_to_ogg() {
    let home = tempfile::tempdir().unwrap();
    // Text that looks like an option reaches the engine as text, not as a flag.
    let elsewhere = home.path().join("elsewhere.wav");
    let text = format!("-w {} said the robot", elsewhere.display());
    let result = call(
        home.path(),
        "text_to_speech",
        &json!({"text": text, "output_path": "voice/note.ogg"}),
        &[],
    );
    assert_eq!(result["success"], true, "{result}");
    let file = home.path().join("voice/note.ogg");
    assert_eq!(result["file_path"], file.display().to_string());
    assert_eq!(result["voice_compatible"], true);
    assert!(result["media_tag"]
        .as_str()
        .unwrap()
        .starts_with("[[audio_as_voice]]\nMEDIA:"));
    assert!(duration_seconds(&file) > 0.5);
    assert!(!elsewhere.exists(), "the text was read as an option");
}

#[test]
fn bad_requests_and_unavailable_engines_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let empty = call(h, "text_to_speech", &json!({"text": "   "}), &[]);
    assert_eq!(empty["error"], "Text is required");
    let escape = call(
        h,
        "text_to_speech",
        &json!({"text": "hi", "output_path": "../up.wav"}),
        &[],
    );
    assert!(
        escape["error"].as_str().unwrap().contains("'..'"),
        "{escape}"
    );
    assert!(!h.parent().unwrap().join("up.wav").exists());
    let folder = call(
        h,
        "text_to_speech",
        &json!({"text": "hi", "output_path": "."}),
        &[],
    );
    assert_eq!(folder["success"], false);

    // A keyed engine without its key: refused with the reason, and not offered.
    std::fs::write(h.join("config.yaml"), "tts:\n  provider: openai\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["call", "text_to_speech", r#"{"text": "hi"}"#])
        .env("HERMES_HOME", h)
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    let refused: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("OPENAI_API_KEY is not set"),
        "{refused}"
    );
    let schema = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["schema", "--toolsets", "tts"])
        .env("HERMES_HOME", h)
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Vec<Value>>(&schema.stdout).unwrap(),
        Vec::<Value>::new()
    );
    std::fs::write(h.join("config.yaml"), "tts:\n  provider: nonesuch\n").unwrap();
    let unknown = call(h, "text_to_speech", &json!({"text": "hi"}), &[]);
    assert!(
        unknown["error"].as_str().unwrap().contains("not an engine"),
        "{unknown}"
    );
    // With the local engine configured by name, the tool is offered again.
    std::fs::write(h.join("config.yaml"), "tts:\n  provider: espeak\n").unwrap();
    let offered = hermes(h, &["schema", "--toolsets", "tts"], "");
    let definitions: Vec<Value> = serde_json::from_slice(&offered.stdout).unwrap();
    assert_eq!(definitions[0]["function"]["name"], "text_to_speech");
}
