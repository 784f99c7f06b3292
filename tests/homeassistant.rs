//! The Home Assistant tools through the binary, against a real Home Assistant core
//! (PyPI's `homeassistant`, installed by .ci/setup.d/70-homeassistant.sh into a cached
//! virtual environment): the test starts it on a free loopback port with a
//! configuration of its own (input_boolean, input_number and template entities),
//! creates the owner through the onboarding API, takes a token and drives the four
//! tools against it.
//!
//! Where that install is missing (and not in CI, which must run the real one), the
//! same scenario runs against a strict fake answering with replies recorded from the
//! real server (tests/data/homeassistant/); the test prints which one it used.

#[path = "../agent/tests/support/mod.rs"]
mod support;
mod web_support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use web_support::{json_reply, respond, run, Reply, Request, Server};

const HA_VERSION: &str = "2025.4.4";
const SETUP: &str = ".ci/setup.d/70-homeassistant.sh";

fn ha_venv() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"));
    home.join(format!(".cache/hermes-tools/homeassistant-{HA_VERSION}"))
}

/// A Home Assistant (real or fake) and a token for it.
struct Peer {
    url: String,
    token: String,
    real: bool,
    /// The fake's record of what reached it (empty for the real one).
    seen: Option<Arc<Mutex<Vec<Request>>>>,
    _guard: Box<dyn std::any::Any>,
}

struct RealHass {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for RealHass {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const CONFIGURATION: &str = r#"homeassistant:
  name: Test home
  latitude: 52.37
  longitude: 4.89
  elevation: 0
  unit_system: metric
  time_zone: UTC
  currency: EUR
  country: NL
http:
  server_host: 127.0.0.1
  server_port: PORT
api:
onboarding:
input_boolean:
  porch_light:
    name: Porch light
    initial: false
  kitchen_fan:
    name: Kitchen fan
    initial: true
input_number:
  living_room_setpoint:
    name: Living room setpoint
    min: 10
    max: 30
    step: 0.5
    initial: 20
template:
  - sensor:
      - name: Living room temperature
        unit_of_measurement: "°C"
        state: "21.5"
"#;

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(20)))
        .http_status_as_error(false)
        .build()
        .into()
}

fn start_real() -> Peer {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    let port = web_support::free_port();
    std::fs::write(
        config.join("configuration.yaml"),
        CONFIGURATION.replace("PORT", &port.to_string()),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("hass.log")).unwrap();
    let child = Command::new(ha_venv().join("bin/hass"))
        .args(["--config", config.to_str().unwrap(), "--skip-pip"])
        .env("HOME", dir.path())
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("hass starts");
    let url = format!("http://127.0.0.1:{port}");
    let guard = RealHass { child, _dir: dir };
    let agent = agent();
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        if let Ok(mut r) = agent.get(&format!("{url}/api/onboarding")).call() {
            if r.status() == 200 {
                let body = r.body_mut().read_to_string().unwrap();
                assert!(body.contains("\"user\""), "{body}");
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "Home Assistant did not come up:\n{}",
            std::fs::read_to_string(guard._dir.path().join("hass.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // The owner, through the onboarding API, then a token for the REST API.
    let client_id = format!("{url}/");
    let mut r = agent
        .post(&format!("{url}/api/onboarding/users"))
        .send_json(json!({
            "client_id": client_id, "name": "Owner", "username": "owner",
            "password": "a-test-password", "language": "en",
        }))
        .unwrap();
    let created: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
    let code = created["auth_code"]
        .as_str()
        .expect("an auth code")
        .to_string();
    let mut r = agent
        .post(&format!("{url}/auth/token"))
        .send_form([
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("client_id", client_id.as_str()),
        ])
        .unwrap();
    let tokens: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
    let token = tokens["access_token"]
        .as_str()
        .expect("a token")
        .to_string();
    Peer {
        url,
        token,
        real: true,
        seen: None,
        _guard: Box::new(guard),
    }
}

/// A fake from the replies the real server gave (tests/data/homeassistant): the same
/// states and services, the same answers to unknown entities, unknown services and a
/// wrong token, and the state changes of the services the scenario calls.
fn start_fake() -> Peer {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/homeassistant");
    let mut states: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(data.join("states.json")).unwrap()).unwrap();
    for s in &mut states {
        if s["entity_id"] == "input_boolean.porch_light" {
            s["state"] = json!("off");
        }
    }
    let services: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("services.json")).unwrap())
            .unwrap();
    let token = "fake-ha-token-0123456789abcdef".to_string();
    let states = Arc::new(Mutex::new(states));
    let expected = format!("Bearer {token}");
    let server = Server::start(move |req: &Request| -> Reply {
        if req.header("authorization") != Some(expected.as_str()) {
            return respond(401, "text/plain; charset=utf-8", "401: Unauthorized");
        }
        let path = req.path().to_string();
        let mut states = states.lock().unwrap();
        match (req.method.as_str(), path.as_str()) {
            ("GET", "/api/states") => json_reply(200, &Value::Array(states.clone())),
            ("GET", "/api/services") => json_reply(200, &services),
            ("GET", p) if p.starts_with("/api/states/") => {
                let id = &p["/api/states/".len()..];
                match states.iter().find(|s| s["entity_id"] == id) {
                    Some(s) => json_reply(200, s),
                    None => json_reply(404, &json!({"message": "Entity not found."})),
                }
            }
            ("POST", p) if p.starts_with("/api/services/") => {
                assert_eq!(
                    req.header("content-type"),
                    Some("application/json"),
                    "service calls are JSON"
                );
                let body: Value = req.json().expect("a JSON body");
                assert!(body.is_object(), "the body is an object: {body}");
                let rest = &p["/api/services/".len()..];
                let (domain, service) = rest.split_once('/').unwrap();
                let known = services
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d["domain"] == domain && d["services"].get(service).is_some());
                if !known {
                    return respond(400, "text/plain; charset=utf-8", "400: Bad Request");
                }
                let id = body["entity_id"].as_str().unwrap_or("").to_string();
                let new_state = match (domain, service) {
                    ("input_boolean", "turn_on") => Some("on".to_string()),
                    ("input_boolean", "turn_off") => Some("off".to_string()),
                    ("input_number", "set_value") => {
                        Some(format!("{:.1}", body["value"].as_f64().unwrap()))
                    }
                    _ => None,
                };
                let mut changed = Vec::new();
                if let Some(new_state) = new_state {
                    for s in states.iter_mut().filter(|s| s["entity_id"] == id.as_str()) {
                        if s["state"] != new_state.as_str() {
                            s["state"] = json!(new_state);
                            changed.push(s.clone());
                        }
                    }
                }
                json_reply(200, &Value::Array(changed))
            }
            _ => respond(404, "text/plain", "404: Not Found"),
        }
    });
    Peer {
        url: server.url(""),
        token,
        real: false,
        seen: Some(Arc::clone(&server.requests)),
        _guard: Box::new(server),
    }
}

fn peer() -> Peer {
    if ha_venv().join(".complete").exists() {
        eprintln!("homeassistant: using the real Home Assistant {HA_VERSION}");
        return start_real();
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "Home Assistant is not installed: run `bash {SETUP}` (CI runs the real one)"
    );
    eprintln!(
        "homeassistant: Home Assistant is not installed (run `bash {SETUP}`); using the fake \
         built from its recorded replies"
    );
    start_fake()
}

fn call(home: &Path, peer: &Peer, name: &str, args: Value) -> (Value, String) {
    let out = run(
        home,
        &["call", name, &args.to_string()],
        &[("HASS_URL", &peer.url), ("HASS_TOKEN", &peer.token)],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !stdout.contains(&peer.token) && !stderr.contains(&peer.token),
        "the token leaked: {stdout} {stderr}"
    );
    (serde_json::from_str(stdout.trim()).unwrap(), stdout)
}

fn requests_seen(peer: &Peer) -> usize {
    peer.seen.as_ref().map_or(0, |s| s.lock().unwrap().len())
}

#[test]
fn the_four_tools_drive_home_assistant() {
    let peer = peer();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();

    // ha_list_entities: everything, by domain, by area (friendly name).
    let (all, _) = call(home, &peer, "ha_list_entities", json!({}));
    let entities = all["result"]["entities"].as_array().unwrap();
    assert_eq!(all["result"]["count"], entities.len());
    let ids: Vec<&str> = entities
        .iter()
        .filter_map(|e| e["entity_id"].as_str())
        .collect();
    for id in [
        "input_boolean.porch_light",
        "input_boolean.kitchen_fan",
        "input_number.living_room_setpoint",
        "sensor.living_room_temperature",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    let porch = entities
        .iter()
        .find(|e| e["entity_id"] == "input_boolean.porch_light")
        .unwrap();
    assert_eq!(
        porch,
        &json!({"entity_id": "input_boolean.porch_light", "state": "off", "friendly_name": "Porch light"})
    );
    let (booleans, _) = call(
        home,
        &peer,
        "ha_list_entities",
        json!({"domain": "input_boolean"}),
    );
    assert_eq!(booleans["result"]["count"], 2, "{booleans}");
    let (room, _) = call(
        home,
        &peer,
        "ha_list_entities",
        json!({"area": "LIVING ROOM"}),
    );
    let room_ids: Vec<&str> = room["result"]["entities"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["entity_id"].as_str())
        .collect();
    assert_eq!(
        room_ids
            .iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        [
            "input_number.living_room_setpoint",
            "sensor.living_room_temperature"
        ]
        .into_iter()
        .collect(),
    );

    // ha_get_state: the full state, and an unknown entity.
    let (state, _) = call(
        home,
        &peer,
        "ha_get_state",
        json!({"entity_id": "sensor.living_room_temperature"}),
    );
    let result = &state["result"];
    assert_eq!(result["state"], "21.5");
    assert_eq!(result["attributes"]["unit_of_measurement"], "°C");
    assert!(result["last_changed"].is_string() && result["last_updated"].is_string());
    let (missing, _) = call(
        home,
        &peer,
        "ha_get_state",
        json!({"entity_id": "light.nowhere"}),
    );
    assert_eq!(
        missing["error"],
        "Failed to get state for light.nowhere: HTTP 404 Not Found: Entity not found."
    );

    // ha_list_services: compact, with field descriptions.
    let (services, _) = call(
        home,
        &peer,
        "ha_list_services",
        json!({"domain": "input_number"}),
    );
    assert_eq!(services["result"]["count"], 1);
    let set_value = &services["result"]["domains"][0]["services"]["set_value"];
    assert_eq!(set_value["description"], "Sets the value.");
    assert_eq!(set_value["fields"]["value"], "The target value.");

    // ha_call_service: entity_id parameter, data as a JSON string, data as an object
    // whose entity_id the parameter overrides.
    let (turned, _) = call(
        home,
        &peer,
        "ha_call_service",
        json!({"domain": "input_boolean", "service": "turn_on", "entity_id": "input_boolean.porch_light"}),
    );
    assert_eq!(
        turned["result"],
        json!({"success": true, "service": "input_boolean.turn_on",
               "affected_entities": [{"entity_id": "input_boolean.porch_light", "state": "on"}]})
    );
    let (now, _) = call(
        home,
        &peer,
        "ha_get_state",
        json!({"entity_id": "input_boolean.porch_light"}),
    );
    assert_eq!(now["result"]["state"], "on");
    let (set, _) = call(
        home,
        &peer,
        "ha_call_service",
        json!({"domain": "input_number", "service": "set_value",
               "data": "{\"entity_id\": \"input_number.living_room_setpoint\", \"value\": 22.5}"}),
    );
    assert_eq!(
        set["result"]["affected_entities"][0]["state"], "22.5",
        "{set}"
    );
    let (overridden, _) = call(
        home,
        &peer,
        "ha_call_service",
        json!({"domain": "input_boolean", "service": "turn_off",
               "entity_id": "input_boolean.kitchen_fan",
               "data": {"entity_id": "input_boolean.porch_light"}}),
    );
    assert_eq!(
        overridden["result"]["affected_entities"],
        json!([{"entity_id": "input_boolean.kitchen_fan", "state": "off"}])
    );
    let (fan, _) = call(
        home,
        &peer,
        "ha_get_state",
        json!({"entity_id": "input_boolean.kitchen_fan"}),
    );
    assert_eq!(fan["result"]["state"], "off");
    let (porch, _) = call(
        home,
        &peer,
        "ha_get_state",
        json!({"entity_id": "input_boolean.porch_light"}),
    );
    assert_eq!(
        porch["result"]["state"], "on",
        "data.entity_id was overridden"
    );

    // An unknown service is Home Assistant's refusal, as a result.
    let (unknown, _) = call(
        home,
        &peer,
        "ha_call_service",
        json!({"domain": "input_boolean", "service": "explode", "entity_id": "input_boolean.porch_light"}),
    );
    assert_eq!(
        unknown["error"],
        "Failed to call input_boolean.explode: HTTP 400 Bad Request: 400: Bad Request"
    );

    // Refused before any request: blocked domains, names that would steer the URL,
    // malformed entity ids and data.
    let before = requests_seen(&peer);
    for (args, error) in [
        (
            json!({"domain": "shell_command", "service": "run"}),
            "Service domain 'shell_command' is blocked for security. Blocked domains: command_line, hassio, pyscript, python_script, rest_command, shell_command",
        ),
        (json!({"domain": "hassio", "service": "host_shutdown"}), "Service domain 'hassio' is blocked for security. Blocked domains: command_line, hassio, pyscript, python_script, rest_command, shell_command"),
        (json!({"domain": "rest_command", "service": "x"}), "Service domain 'rest_command' is blocked for security. Blocked domains: command_line, hassio, pyscript, python_script, rest_command, shell_command"),
        (json!({"domain": "shell_command/../light", "service": "turn_on"}), "Invalid domain format: 'shell_command/../light'"),
        (json!({"domain": "../../api/config", "service": "x"}), "Invalid domain format: '../../api/config'"),
        (json!({"domain": "light", "service": "turn_on?x=1"}), "Invalid service format: 'turn_on?x=1'"),
        (json!({"domain": "light", "service": "turn_on", "entity_id": "light/../x"}), "Invalid entity_id format: light/../x"),
        (json!({"domain": "light", "service": "turn_on", "data": "{not json"}), "Invalid JSON string in 'data' parameter: key must be a string at line 1 column 2"),
        (json!({"domain": "light", "service": "turn_on", "data": "[1, 2]"}), "Invalid 'data' parameter: it must be a JSON object"),
        (json!({"domain": "", "service": "turn_on"}), "Missing required parameters: domain and service"),
    ] {
        let (answer, _) = call(home, &peer, "ha_call_service", args.clone());
        assert_eq!(answer["error"], error, "{args}");
    }
    let (bad_id, _) = call(
        home,
        &peer,
        "ha_get_state",
        json!({"entity_id": "../config"}),
    );
    assert_eq!(bad_id["error"], "Invalid entity_id format: ../config");
    assert_eq!(
        requests_seen(&peer),
        before,
        "a refused call reached the server"
    );

    // A wrong token: Home Assistant's 401, the token not echoed.
    let out = run(
        home,
        &["call", "ha_list_entities", "{}"],
        &[
            ("HASS_URL", &peer.url),
            ("HASS_TOKEN", "wrong-token-abcdef"),
        ],
        "",
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer["error"],
        "Failed to list entities: HTTP 401 Unauthorized: 401: Unauthorized"
    );

    // Without HASS_TOKEN the toolset is not offered.
    let listed = run(home, &["list", "--toolsets", "homeassistant"], &[], "");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("ha_call_service") && listed.contains("unavailable"),
        "{listed}"
    );

    // Each of the four through serve, mcp and the agent. The porch light is on here.
    let four = [
        ("ha_list_entities", json!({"domain": "input_number"})),
        (
            "ha_get_state",
            json!({"entity_id": "input_boolean.porch_light"}),
        ),
        ("ha_list_services", json!({"domain": "input_boolean"})),
        (
            "ha_call_service",
            json!({"domain": "input_boolean", "service": "turn_on", "entity_id": "input_boolean.porch_light"}),
        ),
    ];
    let check = |tool: &str, result: &Value| {
        let text = result.to_string();
        match tool {
            "ha_list_entities" => {
                assert!(text.contains("input_number.living_room_setpoint"), "{text}")
            }
            "ha_get_state" => assert_eq!(result["result"]["state"], "on", "{text}"),
            "ha_list_services" => assert!(text.contains("turn_off"), "{text}"),
            _ => assert!(result.get("error").is_none(), "{text}"),
        }
        assert!(!text.contains(&peer.token));
    };
    let lines: String = four
        .iter()
        .enumerate()
        .map(|(i, (tool, args))| {
            format!(
                "{}\n",
                json!({"id": format!("h{i}"), "task_id": format!("t{i}"), "type": "function",
                       "function": {"name": tool, "arguments": args.to_string()}})
            )
        })
        .collect();
    let out = run(
        home,
        &["serve"],
        &[("HASS_URL", &peer.url), ("HASS_TOKEN", &peer.token)],
        &lines,
    );
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (i, (tool, _)) in four.iter().enumerate() {
        let answer = answers
            .iter()
            .find(|a| a["tool_call_id"] == format!("h{i}"))
            .unwrap_or_else(|| panic!("no answer for {tool}: {answers:?}"));
        check(
            tool,
            &serde_json::from_str(answer["content"].as_str().unwrap()).unwrap(),
        );
    }
    let mut mcp_input = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect::<String>();
    for (i, (tool, args)) in four.iter().enumerate() {
        mcp_input.push_str(&format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": {"name": tool, "arguments": args}})
        ));
    }
    let out = run(
        home,
        &["mcp", "--toolsets", "homeassistant"],
        &[("HASS_URL", &peer.url), ("HASS_TOKEN", &peer.token)],
        &mcp_input,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains(&peer.token));
    let replies: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    for (i, (tool, _)) in four.iter().enumerate() {
        let reply = replies
            .iter()
            .find(|v| v["id"] == 10 + i)
            .unwrap_or_else(|| panic!("no tools/call answer for {tool}: {stdout}"));
        let text = reply["result"]["content"][0]["text"].as_str().unwrap();
        check(tool, &serde_json::from_str(text).unwrap());
    }
    // And by an agent: the model looks around, then turns the porch light off.
    let mut turn: Vec<(String, &str, Value)> = four[..3]
        .iter()
        .enumerate()
        .map(|(i, (tool, args))| (format!("c{i}"), *tool, args.clone()))
        .collect();
    turn.push((
        "c3".into(),
        "ha_call_service",
        json!({"domain": "input_boolean", "service": "turn_off", "entity_id": "input_boolean.porch_light"}),
    ));
    let calls: Vec<(&str, &str, Value)> = turn
        .iter()
        .map(|(id, tool, args)| (id.as_str(), *tool, args.clone()))
        .collect();
    let model = support::ScriptedModel::script(vec![
        support::Reply::Json(support::tool_calls(&calls[..3])),
        support::Reply::Json(support::tool_calls(&calls[3..])),
        support::Reply::Json(support::final_answer("done")),
    ]);
    let out = run(
        home,
        &[
            "agent",
            "Turn the porch light off",
            "--base-url",
            &model.base_url,
            "--model",
            "stand-in",
            "--toolsets",
            "homeassistant",
        ],
        &[("HASS_URL", &peer.url), ("HASS_TOKEN", &peer.token)],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let looked: Vec<Value> = model.request(1)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect();
    assert_eq!(looked.len(), 3, "{looked:?}");
    for (i, (tool, _)) in four[..3].iter().enumerate() {
        let message = looked
            .iter()
            .find(|m| m["tool_call_id"] == format!("c{i}"))
            .unwrap();
        check(
            tool,
            &serde_json::from_str(message["content"].as_str().unwrap()).unwrap(),
        );
    }
    let seen = support::last_message(&model.request(2), "tool").unwrap();
    assert!(seen.contains("\"affected_entities\""), "{seen}");
    assert!(
        !seen.contains(&peer.token) && !String::from_utf8_lossy(&out.stderr).contains(&peer.token)
    );
    let (porch, _) = call(
        home,
        &peer,
        "ha_get_state",
        json!({"entity_id": "input_boolean.porch_light"}),
    );
    assert_eq!(porch["result"]["state"], "off");

    eprintln!(
        "homeassistant: scenario passed against the {} server",
        if peer.real { "real" } else { "fake" }
    );
}
