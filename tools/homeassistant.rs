//! Home Assistant over its REST API: `ha_list_entities`, `ha_get_state`,
//! `ha_list_services`, `ha_call_service`. The instance is `HASS_URL` (default
//! `http://homeassistant.local:8123`), an endpoint the operator chose, reached with
//! the long-lived access token `HASS_TOKEN`, which goes only into the
//! `Authorization` header and never into a result. Every name the model gives is
//! checked before any request: entity ids, domains and services against Home
//! Assistant's own name patterns (so nothing can steer the URL path), and service
//! domains that run commands or make requests from the Home Assistant host are
//! refused.

use hermes_runtime::prelude::*;
use regex::Regex;
use std::sync::LazyLock;
use std::time::Duration;

const DEFAULT_URL: &str = "http://homeassistant.local:8123";
/// Largest answer read from Home Assistant.
const MAX_ANSWER_BYTES: u64 = 32 * 1024 * 1024;

/// Service domains refused whatever the data: they run shell commands or scripts on the
/// Home Assistant host, control its add-ons and host, or make HTTP requests from it.
pub const BLOCKED_DOMAINS: [&str; 6] = [
    "command_line",
    "hassio",
    "pyscript",
    "python_script",
    "rest_command",
    "shell_command",
];

static ENTITY_ID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z_][a-z0-9_]*\.[a-z0-9_]+$").unwrap());
static NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[a-z][a-z0-9_]*$").unwrap());

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Offered when `HASS_TOKEN` is set, as in the original.
pub fn ha_available() -> bool {
    env("HASS_TOKEN").is_some()
}

/// Why the Home Assistant tools are not offered.
pub fn ha_unavailable_reason() -> Option<String> {
    (!ha_available()).then(|| "HASS_TOKEN is not set".to_string())
}

struct Hass {
    url: String,
    token: String,
}

impl Hass {
    fn from_env() -> Hass {
        Hass {
            url: env("HASS_URL")
                .unwrap_or_else(|| DEFAULT_URL.into())
                .trim_end_matches('/')
                .to_string(),
            token: env("HASS_TOKEN").unwrap_or_default(),
        }
    }

    /// `text` with the token masked, whatever echoed it.
    fn scrub(&self, text: &str) -> String {
        let text = if self.token.len() >= 4 {
            text.replace(&self.token, "***")
        } else {
            text.to_string()
        };
        hermes_runtime::redact::redact_secrets(&text)
    }

    /// One request; the parsed JSON of a 2xx answer, else a sentence.
    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        timeout: u64,
    ) -> Result<Value, String> {
        let agent = hermes_net::operator_agent(Duration::from_secs(timeout));
        let url = format!("{}{path}", self.url);
        let auth = format!("Bearer {}", self.token);
        let sent = match body {
            Some(body) => agent
                .post(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(body.to_string()),
            None => {
                debug_assert_eq!(method, "GET");
                agent
                    .get(&url)
                    .header("Authorization", &auth)
                    .header("Content-Type", "application/json")
                    .call()
            }
        };
        let mut response = sent.map_err(|e| {
            self.scrub(&format!("cannot reach Home Assistant at {}: {e}", self.url))
        })?;
        let status = response.status();
        let text = response
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_string()
            .map_err(|e| self.scrub(&format!("cannot read Home Assistant's answer: {e}")))?;
        if !status.is_success() {
            let detail = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_else(|| text.trim().chars().take(300).collect());
            let reason = status.canonical_reason().unwrap_or("");
            let mut message = format!("HTTP {} {reason}", status.as_u16());
            if !detail.is_empty() {
                message.push_str(&format!(": {detail}"));
            }
            return Err(self.scrub(message.trim()));
        }
        serde_json::from_str(&text)
            .map_err(|e| self.scrub(&format!("Home Assistant's answer is not JSON: {e}")))
    }
}

fn result(value: Value) -> ToolResult {
    Ok(json!({ "result": value }).into())
}

fn text_of<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// List Home Assistant entities. Optionally filter by domain (light, switch, climate, sensor, binary_sensor, cover, fan, etc.) or by area name (living room, kitchen, bedroom, etc.).
#[tool(toolset = "homeassistant", emoji = "🏠", check = ha_available, unavailable_reason = ha_unavailable_reason, concurrency = "read_only")]
pub fn ha_list_entities(
    /// Entity domain to filter by (e.g. 'light', 'switch', 'climate', 'sensor', 'binary_sensor', 'cover', 'fan', 'media_player'). Omit to list all entities.
    domain: Option<String>,
    /// Area/room name to filter by (e.g. 'living room', 'kitchen'). Matches against entity friendly names. Omit to list all.
    area: Option<String>,
) -> ToolResult {
    let hass = Hass::from_env();
    let states = match hass.request("GET", "/api/states", None, 15) {
        Ok(states) => states,
        Err(e) => return Ok(ToolOutput::error(format!("Failed to list entities: {e}"))),
    };
    let domain = domain.filter(|d| !d.is_empty()).map(|d| format!("{d}."));
    let area = area.filter(|a| !a.is_empty()).map(|a| a.to_lowercase());
    let entities: Vec<Value> = states
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| {
            domain
                .as_deref()
                .is_none_or(|d| text_of(s, "/entity_id").starts_with(d))
        })
        .filter(|s| {
            area.as_deref().is_none_or(|a| {
                text_of(s, "/attributes/friendly_name")
                    .to_lowercase()
                    .contains(a)
                    || text_of(s, "/attributes/area").to_lowercase().contains(a)
            })
        })
        .map(|s| {
            json!({
                "entity_id": s.get("entity_id").cloned().unwrap_or(Value::Null),
                "state": s.get("state").cloned().unwrap_or(Value::Null),
                "friendly_name": text_of(s, "/attributes/friendly_name"),
            })
        })
        .collect();
    result(json!({"count": entities.len(), "entities": entities}))
}

/// Get the detailed state of a single Home Assistant entity, including all attributes (brightness, color, temperature setpoint, sensor readings, etc.).
#[tool(toolset = "homeassistant", emoji = "🏠", check = ha_available, unavailable_reason = ha_unavailable_reason, concurrency = "read_only")]
pub fn ha_get_state(
    /// The entity ID to query (e.g. 'light.living_room', 'climate.thermostat', 'sensor.temperature').
    entity_id: String,
) -> ToolResult {
    if entity_id.is_empty() {
        return Ok(ToolOutput::error("Missing required parameter: entity_id"));
    }
    if !ENTITY_ID.is_match(&entity_id) {
        return Ok(ToolOutput::error(format!(
            "Invalid entity_id format: {entity_id}"
        )));
    }
    let hass = Hass::from_env();
    match hass.request("GET", &format!("/api/states/{entity_id}"), None, 10) {
        Ok(data) => result(json!({
            "entity_id": data.get("entity_id").cloned().unwrap_or(Value::Null),
            "state": data.get("state").cloned().unwrap_or(Value::Null),
            "attributes": data.get("attributes").cloned().unwrap_or_else(|| json!({})),
            "last_changed": data.get("last_changed").cloned().unwrap_or(Value::Null),
            "last_updated": data.get("last_updated").cloned().unwrap_or(Value::Null),
        })),
        Err(e) => Ok(ToolOutput::error(format!(
            "Failed to get state for {entity_id}: {e}"
        ))),
    }
}

/// List available Home Assistant services (actions) for device control. Shows what actions can be performed on each device type and what parameters they accept. Use this to discover how to control devices found via ha_list_entities.
#[tool(toolset = "homeassistant", emoji = "🏠", check = ha_available, unavailable_reason = ha_unavailable_reason, concurrency = "read_only")]
pub fn ha_list_services(
    /// Filter by domain (e.g. 'light', 'climate', 'switch'). Omit to list services for all domains.
    domain: Option<String>,
) -> ToolResult {
    let hass = Hass::from_env();
    let services = match hass.request("GET", "/api/services", None, 15) {
        Ok(services) => services,
        Err(e) => return Ok(ToolOutput::error(format!("Failed to list services: {e}"))),
    };
    let domain = domain.filter(|d| !d.is_empty());
    let domains: Vec<Value> = services
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| {
            domain
                .as_deref()
                .is_none_or(|want| text_of(d, "/domain") == want)
        })
        .map(|d| {
            let mut compact = serde_json::Map::new();
            if let Some(services) = d.get("services").and_then(Value::as_object) {
                for (name, info) in services {
                    let mut entry = serde_json::Map::new();
                    entry.insert("description".into(), json!(text_of(info, "/description")));
                    if let Some(fields) = info.get("fields").and_then(Value::as_object) {
                        if !fields.is_empty() {
                            let described: serde_json::Map<String, Value> = fields
                                .iter()
                                .filter(|(_, v)| v.is_object())
                                .map(|(k, v)| (k.clone(), json!(text_of(v, "/description"))))
                                .collect();
                            entry.insert("fields".into(), Value::Object(described));
                        }
                    }
                    compact.insert(name.clone(), Value::Object(entry));
                }
            }
            json!({"domain": text_of(d, "/domain"), "services": compact})
        })
        .collect();
    result(json!({"count": domains.len(), "domains": domains}))
}

/// Call a Home Assistant service to control a device. Use ha_list_services to discover available services and their parameters for each domain.
#[tool(toolset = "homeassistant", emoji = "🏠", check = ha_available)]
pub fn ha_call_service(
    /// Service domain (e.g. 'light', 'switch', 'climate', 'cover', 'media_player', 'fan', 'scene', 'script').
    domain: String,
    /// Service name (e.g. 'turn_on', 'turn_off', 'toggle', 'set_temperature', 'set_hvac_mode', 'open_cover', 'close_cover', 'set_volume_level').
    service: String,
    /// Target entity ID (e.g. 'light.living_room'). Some services (like scene.turn_on) may not need this.
    entity_id: Option<String>,
    /// Additional service data as a JSON string. Examples: {"brightness": 255, "color_name": "blue"} for lights, {"temperature": 22, "hvac_mode": "heat"} for climate, {"volume_level": 0.5} for media players.
    data: Option<String>,
) -> ToolResult {
    if domain.is_empty() || service.is_empty() {
        return Ok(ToolOutput::error(
            "Missing required parameters: domain and service",
        ));
    }
    // Names first: a domain like "shell_command/../light" is refused as a name before
    // the blocklist is consulted, and nothing odd reaches the URL path.
    if !NAME.is_match(&domain) {
        return Ok(ToolOutput::error(format!(
            "Invalid domain format: '{domain}'"
        )));
    }
    if !NAME.is_match(&service) {
        return Ok(ToolOutput::error(format!(
            "Invalid service format: '{service}'"
        )));
    }
    if BLOCKED_DOMAINS.contains(&domain.as_str()) {
        return Ok(ToolOutput::error(format!(
            "Service domain '{domain}' is blocked for security. Blocked domains: {}",
            BLOCKED_DOMAINS.join(", ")
        )));
    }
    let entity_id = entity_id.filter(|e| !e.is_empty());
    if let Some(id) = &entity_id {
        if !ENTITY_ID.is_match(id) {
            return Ok(ToolOutput::error(format!("Invalid entity_id format: {id}")));
        }
    }
    // A JSON object given as an object arrives here as its JSON text (the runtime's
    // argument repair), so both spellings take one path.
    let mut payload = match data.as_deref().map(str::trim) {
        None | Some("") => serde_json::Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(Value::Null) => serde_json::Map::new(),
            Ok(_) => {
                return Ok(ToolOutput::error(
                    "Invalid 'data' parameter: it must be a JSON object",
                ))
            }
            Err(e) => {
                return Ok(ToolOutput::error(format!(
                    "Invalid JSON string in 'data' parameter: {e}"
                )))
            }
        },
    };
    if let Some(id) = entity_id {
        payload.insert("entity_id".into(), Value::String(id));
    }
    let hass = Hass::from_env();
    let path = format!("/api/services/{domain}/{service}");
    match hass.request("POST", &path, Some(&Value::Object(payload)), 15) {
        Ok(answer) => {
            let affected: Vec<Value> = answer
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| json!({"entity_id": text_of(s, "/entity_id"), "state": text_of(s, "/state")}))
                .collect();
            result(json!({
                "success": true,
                "service": format!("{domain}.{service}"),
                "affected_entities": affected,
            }))
        }
        Err(e) => Ok(ToolOutput::error(format!(
            "Failed to call {domain}.{service}: {e}"
        ))),
    }
}
