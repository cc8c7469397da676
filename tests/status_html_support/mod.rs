//! Helpers of the status page HTML and browser tests: services, pages, incidents and
//! checks linked to services with a real result reported through the agent API.
#![allow(dead_code)]

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use outpost::model::RunStatus;

use super::service_support::{TestService, result_for};

pub fn colors(value: &str) -> Value {
    let names = [
        "bodyBackgroundColor",
        "headerBackgroundColor",
        "headerFontColor",
        "titleFontColor",
        "bodyFontColor",
        "bodyFontColorMuted",
        "navigationFontColor",
        "linkFontColor",
        "cardBackgroundColor",
        "borderColor",
        "primaryButtonBackgroundColor",
        "primaryButtonFontColor",
    ];
    Value::Object(
        names
            .iter()
            .map(|n| (n.to_string(), json!(value)))
            .collect(),
    )
}

/// Light and dark themes whose body backgrounds are `light_bg` and `dark_bg`.
pub fn theme(light_bg: &str, dark_bg: &str) -> Value {
    let mut light = colors("#1F2937");
    light["bodyBackgroundColor"] = json!(light_bg);
    light["cardBackgroundColor"] = json!("#FFFFFF");
    light["headerBackgroundColor"] = json!("#FFFFFF");
    light["borderColor"] = json!("#D9DEE5");
    light["bodyFontColorMuted"] = json!("#6B7280");
    light["primaryButtonFontColor"] = json!("#FFFFFF");
    light["primaryButtonBackgroundColor"] = json!("#2563EB");
    let mut dark = colors("#E5E7EB");
    dark["bodyBackgroundColor"] = json!(dark_bg);
    dark["cardBackgroundColor"] = json!("#1B1F27");
    dark["headerBackgroundColor"] = json!("#171A21");
    dark["borderColor"] = json!("#2D333F");
    dark["bodyFontColorMuted"] = json!("#9CA3AF");
    dark["primaryButtonBackgroundColor"] = json!("#3B82F6");
    json!({"light": light, "dark": dark})
}

pub async fn send(
    svc: &TestService,
    method: Method,
    path: &str,
    body: &Value,
) -> (StatusCode, Value) {
    let resp = svc.api(method, path).json(body).send().await.unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub async fn service(svc: &TestService, name: &str) -> Value {
    let (status, body) = send(
        svc,
        Method::POST,
        "/v1/status-pages/services",
        &json!({"name": name}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Creates a page from `body` (name, url, cards, ... as the API takes them).
pub async fn page(svc: &TestService, body: Value) -> Value {
    let (status, created) = send(svc, Method::POST, "/v1/status-pages", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created
}

/// A card naming `services`.
pub fn card(name: &str, services: &[&Value]) -> Value {
    json!({"name": name, "services": services.iter().map(|s| json!({"id": s["id"]})).collect::<Vec<_>>()})
}

pub async fn incident(
    svc: &TestService,
    name: &str,
    services: &[&Value],
    severity: &str,
    update: Value,
) -> Value {
    let refs: Vec<Value> = services
        .iter()
        .map(|s| json!({"id": s["id"], "name": s["name"], "accountId": svc.tenant.account.id}))
        .collect();
    let (status, body) = send(
        svc,
        Method::POST,
        "/v1/status-pages/incidents",
        &json!({"name": name, "severity": severity, "services": refs, "incidentUpdates": [update]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

pub async fn incident_update(svc: &TestService, incident: &Value, update: Value) {
    let id = incident["id"].as_str().unwrap();
    let (status, body) = send(
        svc,
        Method::POST,
        &format!("/v1/status-pages/incidents/{id}/incident-updates"),
        &update,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// Links a new URL check to `service` and reports one run of it with `status`
/// through the agent API.
pub async fn linked_check_with_result(svc: &TestService, service: &Value, status: RunStatus) {
    let check = svc
        .create_check(json!({"name": format!("check of {}", service["name"]),
            "triggerIncident": {"serviceId": service["id"], "severity": "MAJOR",
                "name": "down", "description": "d", "notifySubscribers": false}}))
        .await;
    let id = check["id"].as_str().unwrap();
    let sessions = svc.trigger_ids(&[id]).await;
    let agent = svc.agent();
    agent.hello().await;
    let jobs = agent.lease(10, 0).await;
    assert_eq!(jobs.len(), 1);
    agent.submit(vec![result_for(&jobs[0], status)]).await;
    let session = svc
        .get_session(sessions[0]["checkSessionId"].as_str().unwrap())
        .await;
    assert!(
        matches!(
            session["status"].as_str(),
            Some("PASSED" | "FAILED" | "DEGRADED")
        ),
        "{session}"
    );
}

/// Creates a key of page `page`; returns (key id, raw key).
pub async fn page_key(svc: &TestService, page: &Value) -> (String, String) {
    let id = page["id"].as_str().unwrap();
    let (status, body) = send(
        svc,
        Method::POST,
        &format!("/v1/status-pages/{id}/keys"),
        &json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    (
        body["id"].as_str().unwrap().to_owned(),
        body["key"].as_str().unwrap().to_owned(),
    )
}
