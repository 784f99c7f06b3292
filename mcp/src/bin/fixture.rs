//! Test support for hermes-mcp (not installed with hermes-tools).
//!
//! - `hermes-mcp-fixture serve [--http ADDR] [--conformance]`: the MCP server over a
//!   registry with no built-in tools, plus the MCP servers and plugins of
//!   `$HERMES_HOME`; with `--conformance`, plus the tools, prompts and resources the
//!   `@modelcontextprotocol/conformance` server scenarios ask for by name (they exist
//!   only here, never in `hermes-tools mcp`).
//!   Each answers through the server's real paths: content conversion, `MEDIA:` files
//!   read through the access policy, the call's client ([`hermes_mcp::caller`]).
//! - `hermes-mcp-fixture conformance-client URL`: the client side for the
//!   `@modelcontextprotocol/conformance` client scenarios (`MCP_CONFORMANCE_SCENARIO`):
//!   connects to URL as the configured server `conf` through [`hermes_mcp::attach`], and
//!   calls the scenario's tool through the registry.

#![allow(deprecated)] // rmcp marks MCP logging deprecated (SEP-2577); the scenarios still log.

use hermes_mcp::caller::Caller;
use hermes_mcp::library::{Library, Serving};
use hermes_mcp::server::{Extras, HttpOptions, Selection};
use hermes_runtime::{DynamicHandler, DynamicTool, Registry, ToolCall, ToolContext};
use rmcp::model::LoggingLevel;
use serde_json::{json, Map, Value};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => {
            let registry = Arc::new(Registry::new(&hermes_mcp::testing::EMPTY_CATALOG));
            let http = match args.iter().position(|a| a == "--http") {
                Some(i) => match hermes_mcp::server::parse_http_addr(
                    args.get(i + 1).map_or("", String::as_str),
                ) {
                    Ok(addr) => Some(addr),
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                },
                None => None,
            };
            let mut extras = Extras::standard();
            if args.iter().any(|a| a == "--conformance") {
                register_conformance_tools(&registry);
                extras = extras.with(Arc::new(ConformanceLibrary));
            }
            match hermes_mcp::server::run_with(
                registry,
                Selection::default(),
                http,
                HttpOptions::default(),
                extras,
            ) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Some("conformance-client") => {
            let Some(url) = args.get(1) else {
                eprintln!("usage: hermes-mcp-fixture conformance-client URL");
                return ExitCode::from(2);
            };
            conformance_client(url)
        }
        _ => {
            eprintln!("usage: hermes-mcp-fixture serve [--http ADDR] [--conformance] | conformance-client URL");
            ExitCode::from(2)
        }
    }
}

fn conformance_client(url: &str) -> ExitCode {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let home = std::env::temp_dir().join(format!("hermes-mcp-conformance-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&home);
    let config =
        json!({"mcp_servers": {"conf": {"url": url, "timeout": 20, "connect_timeout": 20}}});
    if std::fs::write(home.join("config.yaml"), config.to_string()).is_err() {
        eprintln!("error: cannot write {}", home.display());
        return ExitCode::from(1);
    }
    let registry = Arc::new(Registry::with_home(
        &hermes_mcp::testing::EMPTY_CATALOG,
        home.clone(),
    ));
    let report = hermes_mcp::attach(&registry);
    print!("{report}");
    let call = |name: &str, args: Value| {
        let result = registry
            .handle_function_call(&ToolCall::new(name, args), &ToolContext::builder().build());
        println!("{name} -> {result}");
        result
    };
    let failed = match scenario.as_str() {
        "tools_call" => hermes_mcp::convert::is_error_result(&call(
            "mcp_conf_add_numbers",
            json!({"a": 5, "b": 3}),
        )),
        "sse-retry" => {
            hermes_mcp::convert::is_error_result(&call("mcp_conf_test_reconnection", json!({})))
        }
        _ => report.servers.iter().any(|s| s.error.is_some()),
    };
    report.clients.shutdown();
    let _ = std::fs::remove_dir_all(&home);
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// A 1x1 red PNG.
const RED_PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

fn text(value: impl Into<String>) -> Result<Value, hermes_runtime::ToolError> {
    Ok(Value::String(value.into()))
}

fn failed(why: impl std::fmt::Display) -> Result<Value, hermes_runtime::ToolError> {
    text(hermes_runtime::tool_error(why.to_string()))
}

/// A short 8 kHz tone as a WAV file.
fn tone_wav() -> Vec<u8> {
    let samples: Vec<u8> = (0..800)
        .map(|i| (128.0 + 100.0 * (i as f64 * 440.0 * std::f64::consts::TAU / 8000.0).sin()) as u8)
        .collect();
    let mut wav = Vec::with_capacity(44 + samples.len());
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + samples.len() as u32).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&8000u32.to_le_bytes());
    wav.extend_from_slice(&8000u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes());
    wav.extend_from_slice(&8u16.to_le_bytes());
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    wav.extend_from_slice(&samples);
    wav
}

/// The elicitation scenarios' tools: ask the form, answer what came back.
fn elicit(
    ctx: &ToolContext,
    message: &str,
    schema: Value,
) -> Result<Value, hermes_runtime::ToolError> {
    let Some(caller) = Caller::of(ctx) else {
        return failed("no MCP client behind this call");
    };
    match caller.elicit(message, schema, Duration::from_secs(30)) {
        Ok(answer) => text(format!(
            "Elicitation completed: action={}, content={}",
            answer.action,
            answer.content.unwrap_or(Value::Null)
        )),
        Err(e) => failed(e),
    }
}

fn register_conformance_tools(registry: &Registry) {
    type Handler = fn(Value, &ToolContext) -> Result<Value, hermes_runtime::ToolError>;
    let no_args = json!({"type": "object", "properties": {}});
    let tools: Vec<(&str, &str, Value, Handler)> = vec![
        (
            "test_image_content",
            "Answers with an image.",
            no_args.clone(),
            |_, _| {
                Ok(json!({"_multimodal": true, "content": [
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{RED_PIXEL_PNG}")}},
            ], "text_summary": "a red pixel"}))
            },
        ),
        (
            "test_audio_content",
            "Writes a tone and hands it over as a MEDIA: file.",
            no_args.clone(),
            |_, ctx| {
                let dir = ctx.hermes_home().join("cache/audio");
                let path = dir.join("conformance-tone.wav");
                if let Err(e) =
                    std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, tone_wav()))
                {
                    return failed(e);
                }
                text(json!({"success": true, "file_path": path, "media_tag": format!("MEDIA:{}", path.display())}).to_string())
            },
        ),
        (
            "test_embedded_resource",
            "Answers with an embedded resource.",
            no_args.clone(),
            |_, _| {
                Ok(json!({"_multimodal": true, "content": [
                {"type": "resource", "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}},
            ], "text_summary": "an embedded resource"}))
            },
        ),
        (
            "test_multiple_content_types",
            "Answers with text, an image and a resource.",
            no_args.clone(),
            |_, _| {
                Ok(json!({"_multimodal": true, "content": [
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{RED_PIXEL_PNG}")}},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}},
            ], "text_summary": "text, an image and a resource"}))
            },
        ),
        (
            "test_tool_with_logging",
            "Logs three messages while it runs.",
            no_args.clone(),
            |_, ctx| {
                let Some(caller) = Caller::of(ctx) else {
                    return failed("no MCP client behind this call");
                };
                let mut sent = 0;
                for (i, message) in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ]
                .iter()
                .enumerate()
                {
                    if i > 0 {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    sent +=
                        usize::from(caller.log(LoggingLevel::Info, "conformance", json!(message)));
                }
                text(format!("Logged {sent} messages"))
            },
        ),
        (
            "test_sampling",
            "Asks the client's model.",
            json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}),
            |args, ctx| {
                let Some(caller) = Caller::of(ctx) else {
                    return failed("no MCP client behind this call");
                };
                let prompt = args["prompt"].as_str().unwrap_or_default();
                match caller.sample(None, prompt, 100, Duration::from_secs(30), None) {
                    Ok(answer) => text(format!("LLM response: {answer}")),
                    Err(e) => failed(e),
                }
            },
        ),
        (
            "test_elicitation",
            "Asks the client's user for a name and an address.",
            json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
            |args, ctx| {
                elicit(
                    ctx,
                    args["message"].as_str().unwrap_or_default(),
                    json!({
                        "type": "object",
                        "properties": {
                            "username": {"type": "string", "description": "User's response"},
                            "email": {"type": "string", "description": "User's email address"},
                        },
                        "required": ["username", "email"],
                    }),
                )
            },
        ),
        (
            "test_reconnection",
            "Runs past the server's polling limit, so its stream is closed and resumed.",
            no_args.clone(),
            |_, _| {
                std::thread::sleep(Duration::from_millis(1500));
                text("Reconnection test completed successfully")
            },
        ),
        (
            "test_elicitation_sep1034_defaults",
            "Asks a form whose fields have defaults.",
            no_args.clone(),
            |_, ctx| {
                elicit(
                    ctx,
                    "Please review your details",
                    json!({
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "default": "John Doe"},
                            "age": {"type": "integer", "default": 30},
                            "score": {"type": "number", "default": 95.5},
                            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                            "verified": {"type": "boolean", "default": true},
                        },
                    }),
                )
            },
        ),
        (
            "test_elicitation_sep1330_enums",
            "Asks a form with every kind of enum.",
            no_args.clone(),
            |_, ctx| {
                elicit(
                    ctx,
                    "Pick your options",
                    json!({
                        "type": "object",
                        "properties": {
                            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                            "titledSingle": {"type": "string", "oneOf": [
                                {"const": "value1", "title": "First Option"},
                                {"const": "value2", "title": "Second Option"},
                                {"const": "value3", "title": "Third Option"},
                            ]},
                            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                            "titledMulti": {"type": "array", "items": {"anyOf": [
                                {"const": "value1", "title": "First Choice"},
                                {"const": "value2", "title": "Second Choice"},
                                {"const": "value3", "title": "Third Choice"},
                            ]}},
                        },
                    }),
                )
            },
        ),
    ];
    for (name, description, parameters, handler) in tools {
        let schema = json!({"name": name, "description": description, "parameters": parameters});
        let handler = DynamicHandler::Sync(Arc::new(handler));
        let tool = DynamicTool::new(name, "conformance", schema, handler);
        if let Err(e) = registry.register(tool, &hermes_runtime::Caller::Host, false) {
            eprintln!("error: {name}: {e}");
        }
    }
}

/// The prompts and resources the conformance scenarios read.
struct ConformanceLibrary;

const TEMPLATE_PREFIX: &str = "test://template/";

impl Library for ConformanceLibrary {
    fn prompts(&self, _serving: &Serving) -> Vec<Value> {
        let argument = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
        vec![
            json!({"name": "test_simple_prompt", "description": "A prompt without arguments."}),
            json!({"name": "test_prompt_with_arguments", "description": "A prompt with two arguments.",
                   "arguments": [argument("arg1", "First test argument"), argument("arg2", "Second test argument")]}),
            json!({"name": "test_prompt_with_embedded_resource", "description": "A prompt embedding a resource.",
                   "arguments": [argument("resourceUri", "URI of the resource to embed")]}),
            json!({"name": "test_prompt_with_image", "description": "A prompt with an image."}),
        ]
    }

    fn prompt(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        _serving: &Serving,
    ) -> Option<Result<Value, String>> {
        let argument = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let user = |content: Value| json!({"role": "user", "content": content});
        Some(Ok(match name {
            "test_simple_prompt" => {
                json!({"messages": [user(json!({"type": "text", "text": "This is a simple prompt for testing."}))]})
            }
            "test_prompt_with_arguments" => {
                let (Some(arg1), Some(arg2)) = (argument("arg1"), argument("arg2")) else {
                    return Some(Err("arg1 and arg2 are required".into()));
                };
                json!({"messages": [user(json!({"type": "text", "text": format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")}))]})
            }
            "test_prompt_with_embedded_resource" => {
                let Some(uri) = argument("resourceUri") else {
                    return Some(Err("resourceUri is required".into()));
                };
                json!({"messages": [
                    user(json!({"type": "resource", "resource": {"uri": uri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}})),
                    user(json!({"type": "text", "text": "Please process the embedded resource above."})),
                ]})
            }
            "test_prompt_with_image" => json!({"messages": [
                user(json!({"type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png"})),
                user(json!({"type": "text", "text": "Please analyze the image above."})),
            ]}),
            _ => return None,
        }))
    }

    fn resources(&self, _serving: &Serving) -> Vec<Value> {
        vec![
            json!({"uri": "test://static-text", "name": "static-text", "description": "A text resource.", "mimeType": "text/plain"}),
            json!({"uri": "test://static-binary", "name": "static-binary", "description": "A binary resource.", "mimeType": "image/png"}),
            json!({"uri": "test://watched-resource", "name": "watched-resource", "description": "A resource to subscribe to.", "mimeType": "text/plain"}),
        ]
    }

    fn templates(&self, _serving: &Serving) -> Vec<Value> {
        vec![
            json!({"uriTemplate": "test://template/{id}/data", "name": "template-data", "description": "Data for an id.", "mimeType": "application/json"}),
        ]
    }

    fn read(&self, uri: &str, _serving: &Serving) -> Option<Result<Vec<Value>, String>> {
        let content = match uri {
            "test://static-text" => {
                json!({"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."})
            }
            "test://static-binary" => {
                json!({"uri": uri, "mimeType": "image/png", "blob": RED_PIXEL_PNG})
            }
            "test://watched-resource" => {
                json!({"uri": uri, "mimeType": "text/plain", "text": "Watched."})
            }
            _ => {
                let id = uri.strip_prefix(TEMPLATE_PREFIX)?.strip_suffix("/data")?;
                let data =
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                json!({"uri": uri, "mimeType": "application/json", "text": data.to_string()})
            }
        };
        Some(Ok(vec![content]))
    }

    fn version(&self, uri: &str, serving: &Serving) -> Option<String> {
        self.read(uri, serving).map(|_| "constant".to_string())
    }

    fn complete(
        &self,
        reference: &Value,
        argument: &str,
        value: &str,
        _context: &Map<String, Value>,
        _serving: &Serving,
    ) -> Option<Vec<String>> {
        if reference["name"] != "test_prompt_with_arguments" {
            return None;
        }
        let words: &[&str] = match argument {
            "arg1" => &["paris", "park", "party", "test", "testing"],
            _ => &[],
        };
        Some(
            words
                .iter()
                .filter(|w| w.starts_with(value))
                .map(|w| w.to_string())
                .collect(),
        )
    }
}
