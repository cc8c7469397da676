//! Monitoring as code through the public API, in process: deploys (gzip and plain),
//! re-deploys updating in place, deletion of what a project no longer declares, dry
//! runs, the deployment's event stream, project deletion, body limits, and the account
//! and runtime endpoints the vendor CLI calls first.

mod service_support;

use std::io::Write;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use service_support::{TestService, error_body};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn heartbeat(logical_id: &str, name: &str, period_hours: i64) -> Value {
    json!({
        "logicalId": logical_id,
        "type": "check",
        "member": true,
        "payload": {
            "name": name, "description": "d", "activated": true, "muted": false, "tags": [],
            "groupId": null, "checkType": "HEARTBEAT",
            "heartbeat": {"period": period_hours, "periodUnit": "hours", "grace": 30, "graceUnit": "minutes"}
        }
    })
}

fn channel(logical_id: &str) -> Value {
    json!({
        "logicalId": logical_id,
        "type": "alert-channel",
        "member": true,
        "payload": {"type": "EMAIL", "config": {"address": "ops@example.com"}}
    })
}

fn subscription(logical_id: &str, channel: &str, check: &str) -> Value {
    json!({
        "logicalId": logical_id,
        "type": "alert-channel-subscription",
        "member": true,
        "payload": {"alertChannelId": {"ref": channel}, "checkId": {"ref": check}, "activated": true}
    })
}

fn project(resources: Vec<Value>) -> Value {
    json!({
        "project": {"logicalId": "ops", "name": "Ops", "repoUrl": null},
        "sharedFiles": [],
        "resources": resources,
        "repoInfo": null,
    })
}

async fn deploy_raw(svc: &TestService, query: &str, body: Vec<u8>, gz: bool) -> reqwest::Response {
    let mut req = svc
        .api(Method::POST, &format!("/v1/projects/deploy?{query}"))
        .header("content-type", "application/json");
    if gz {
        req = req.header("content-encoding", "gzip");
    }
    req.body(body).send().await.unwrap()
}

/// Deploys (not a dry run); returns the deployment id.
async fn deploy(svc: &TestService, body: &Value, gz: bool) -> String {
    let bytes = serde_json::to_vec(body).unwrap();
    let bytes = if gz { gzip(&bytes) } else { bytes };
    let resp = deploy_raw(svc, "dryRun=false&scheduleOnDeploy=true", bytes, gz).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let out: Value = resp.json().await.unwrap();
    out["id"].as_str().unwrap().to_owned()
}

/// The events of a deployment: (event, data) pairs.
async fn events(svc: &TestService, id: &str) -> Vec<(String, Value)> {
    let resp = svc
        .api(
            Method::GET,
            &format!("/v1/projects/ops/deployments/{id}/events"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = resp.text().await.unwrap();
    text.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|block| {
            let mut event = String::new();
            let mut data = Value::Null;
            for line in block.lines() {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = e.to_owned();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(d).unwrap();
                }
            }
            (event, data)
        })
        .collect()
}

/// The diff of a completed deployment, as (type, logicalId, action) -> physicalId.
async fn diff(svc: &TestService, id: &str) -> Vec<(String, String, String, Value)> {
    let evs = events(svc, id).await;
    let (last, data) = evs.last().unwrap();
    assert_eq!(last, "complete", "{evs:?}");
    assert_eq!(data["status"], "SUCCEEDED");
    let mut out: Vec<_> = data["result"]["diff"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["type"].as_str().unwrap().to_owned(),
                d["logicalId"].as_str().unwrap().to_owned(),
                d["action"].as_str().unwrap().to_owned(),
                d["physicalId"].clone(),
            )
        })
        .collect();
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

async fn get(svc: &TestService, path: &str) -> (StatusCode, Value) {
    let resp = svc.api(Method::GET, path).send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn gzip_deploy_then_plain_redeploy_updates_in_place_and_deletes_the_rest() {
    let svc = TestService::start().await;
    let first = project(vec![
        heartbeat("backup", "Nightly backup", 1),
        heartbeat("report", "Weekly report", 2),
        channel("ops-mail"),
        subscription("backup-ops", "ops-mail", "backup"),
    ]);
    let id = deploy(&svc, &first, true).await;
    let evs = events(&svc, &id).await;
    assert_eq!(evs[0].0, "progress");
    assert!(evs[0].1["progress"].is_number());
    let d = diff(&svc, &id).await;
    assert_eq!(d.len(), 4);
    assert!(d.iter().all(|e| e.2 == "CREATE"), "{d:?}");
    let backup_id = d
        .iter()
        .find(|e| e.1 == "backup")
        .unwrap()
        .3
        .as_str()
        .unwrap()
        .to_owned();
    let report_id = d
        .iter()
        .find(|e| e.1 == "report")
        .unwrap()
        .3
        .as_str()
        .unwrap()
        .to_owned();
    let channel_id = d
        .iter()
        .find(|e| e.1 == "ops-mail")
        .unwrap()
        .3
        .as_i64()
        .unwrap();

    let (status, backup) = get(&svc, &format!("/v1/checks/{backup_id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(backup["name"], "Nightly backup");
    let ping_url = backup["heartbeat"]["pingUrl"].as_str().unwrap().to_owned();
    assert_eq!(
        backup["alertChannelSubscriptions"],
        json!([{"alertChannelId": channel_id, "activated": true}])
    );
    let (_, report) = get(&svc, &format!("/v1/checks/{report_id}")).await;
    assert_eq!(report["alertChannelSubscriptions"], json!([]));

    // Plain JSON: the backup renamed and unsubscribed, the report gone.
    let second = project(vec![
        heartbeat("backup", "Backup (nightly)", 3),
        channel("ops-mail"),
    ]);
    let id2 = deploy(&svc, &second, false).await;
    assert_ne!(id, id2);
    let d2 = diff(&svc, &id2).await;
    let actions: Vec<(&str, &str)> = d2.iter().map(|e| (e.1.as_str(), e.2.as_str())).collect();
    assert_eq!(
        actions,
        vec![
            ("ops-mail", "UPDATE"),
            ("backup-ops", "DELETE"),
            ("backup", "UPDATE"),
            ("report", "DELETE")
        ]
    );
    assert_eq!(
        d2.iter().find(|e| e.1 == "backup").unwrap().3,
        json!(backup_id)
    );
    let (_, backup2) = get(&svc, &format!("/v1/checks/{backup_id}")).await;
    assert_eq!(backup2["name"], "Backup (nightly)");
    assert_eq!(backup2["heartbeat"]["period"], 3);
    assert_eq!(backup2["heartbeat"]["pingUrl"], ping_url.as_str());
    assert_eq!(backup2["alertChannelSubscriptions"], json!([]));
    let (status, _) = get(&svc, &format!("/v1/checks/{report_id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = get(&svc, &format!("/v1/alert-channels/{channel_id}")).await;
    assert_eq!(status, StatusCode::OK);

    // The ping address still works after the re-deploy.
    let resp = svc.http.get(&ping_url).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    svc.stop().await;
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let svc = TestService::start().await;
    let body = project(vec![heartbeat("backup", "Nightly backup", 1)]);
    let resp = deploy_raw(
        &svc,
        "dryRun=true",
        serde_json::to_vec(&body).unwrap(),
        false,
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let out: Value = resp.json().await.unwrap();
    assert_eq!(
        out,
        json!({"diff": [{"type": "check", "logicalId": "backup", "physicalId": null, "action": "CREATE"}]})
    );
    let (_, checks) = get(&svc, "/v1/checks").await;
    assert_eq!(checks, json!([]));

    let id = deploy(&svc, &body, true).await;
    let check_id = diff(&svc, &id).await[0].3.clone();
    let empty = project(vec![]);
    let bytes = gzip(&serde_json::to_vec(&empty).unwrap());
    // No Content-Encoding: the gzip magic number is enough.
    let resp = deploy_raw(&svc, "dryRun=true", bytes, false).await;
    let out: Value = resp.json().await.unwrap();
    assert_eq!(
        out["diff"],
        json!([{"type": "check", "logicalId": "backup", "physicalId": check_id, "action": "DELETE"}])
    );
    let (status, _) = get(&svc, &format!("/v1/checks/{}", check_id.as_str().unwrap())).await;
    assert_eq!(status, StatusCode::OK);
    svc.stop().await;
}

#[tokio::test]
async fn delete_project_removes_its_resources() {
    let svc = TestService::start().await;
    let id = deploy(
        &svc,
        &project(vec![
            heartbeat("backup", "Nightly backup", 1),
            channel("mail"),
        ]),
        true,
    )
    .await;
    let d = diff(&svc, &id).await;
    assert_eq!(
        get(&svc, &format!("/v1/checks/{}", d[1].3.as_str().unwrap()))
            .await
            .0,
        StatusCode::OK
    );
    let resp = svc
        .api(Method::DELETE, "/v1/projects/ops?dryRun=true")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let dry: Value = resp.json().await.unwrap();
    assert_eq!(dry["diff"].as_array().unwrap().len(), 2, "{dry}");
    let resp = svc
        .api(Method::DELETE, "/v1/projects/ops")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["status"], "SUCCEEDED");
    let deletion = diff(&svc, answer["id"].as_str().unwrap()).await;
    assert!(deletion.iter().all(|e| e.2 == "DELETE") && deletion.len() == 2);
    let check = d
        .iter()
        .find(|e| e.0 == "check")
        .unwrap()
        .3
        .as_str()
        .unwrap()
        .to_owned();
    let chan = d
        .iter()
        .find(|e| e.0 == "alert-channel")
        .unwrap()
        .3
        .as_i64()
        .unwrap();
    assert_eq!(
        get(&svc, &format!("/v1/checks/{check}")).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&svc, &format!("/v1/alert-channels/{chan}")).await.0,
        StatusCode::NOT_FOUND
    );
    // Nothing left: a plain answer, no deployment to follow.
    let resp = svc
        .api(Method::DELETE, "/v1/projects/ops")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.json::<Value>().await.unwrap(), json!({"diff": []}));
    // A later deploy of the project creates afresh.
    let again = deploy(&svc, &project(vec![heartbeat("backup", "b", 1)]), false).await;
    assert_eq!(diff(&svc, &again).await[0].2, "CREATE");
    svc.stop().await;
}

#[tokio::test]
async fn bad_bodies_are_refused() {
    let svc = TestService::start().await;
    let resp = deploy_raw(&svc, "", b"\x1f\x8bnot gzip at all".to_vec(), true).await;
    let body = error_body(resp, StatusCode::BAD_REQUEST).await;
    assert!(body["message"].as_str().unwrap().contains("gzip"), "{body}");

    // 17 MiB that compress to a few kilobytes: refused while decompressing.
    let bomb = gzip(&vec![b' '; 17 * 1024 * 1024]);
    assert!(bomb.len() < 1024 * 1024);
    let resp = deploy_raw(&svc, "", bomb, true).await;
    error_body(resp, StatusCode::PAYLOAD_TOO_LARGE).await;
    let resp = deploy_raw(&svc, "", vec![b' '; 17 * 1024 * 1024], false).await;
    error_body(resp, StatusCode::PAYLOAD_TOO_LARGE).await;

    let mut browser = heartbeat("b", "b", 1);
    browser["payload"]["checkType"] = json!("BROWSER");
    let resp = deploy_raw(
        &svc,
        "",
        serde_json::to_vec(&project(vec![browser])).unwrap(),
        false,
    )
    .await;
    let body = error_body(resp, StatusCode::BAD_REQUEST).await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("resources[0].payload.checkType: only HEARTBEAT"),
        "{body}"
    );
    let mut bad = heartbeat("b", "b", 1);
    bad["payload"]["heartbeat"]["period"] = json!(1000);
    bad["payload"]["heartbeat"]["periodUnit"] = json!("days");
    let resp = deploy_raw(
        &svc,
        "",
        serde_json::to_vec(&project(vec![bad])).unwrap(),
        false,
    )
    .await;
    let body = error_body(resp, StatusCode::BAD_REQUEST).await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("resources[0].payload.heartbeat.period"),
        "{body}"
    );
    let dangling = project(vec![heartbeat("b", "b", 1), subscription("s", "nope", "b")]);
    let resp = deploy_raw(&svc, "", serde_json::to_vec(&dangling).unwrap(), false).await;
    let body = error_body(resp, StatusCode::BAD_REQUEST).await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("alertChannelId.ref"),
        "{body}"
    );
    // Nothing was created by the refused deploys.
    assert_eq!(get(&svc, "/v1/checks").await.1, json!([]));
    svc.stop().await;
}

#[tokio::test]
async fn account_and_runtimes() {
    let svc = TestService::start().await;
    let me = svc.tenant.account.id;
    let (status, body) = get(&svc, &format!("/next/accounts/{me}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"id": me, "name": svc.tenant.account.name, "runtimeId": null})
    );

    let other = svc.other_tenant("elsewhere").await;
    let (status, _) = get(&svc, &format!("/next/accounts/{}", other.account.id)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let resp = svc
        .http
        .get(format!("{}/next/accounts/{me}", svc.base))
        .bearer_auth("wrong-key")
        .header("x-checkly-account", me.to_string())
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::UNAUTHORIZED).await;

    let (status, list) = get(&svc, "/v1/runtimes").await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["2025.04", "2026.04"]);
    let (status, one) = get(&svc, "/v1/runtimes/2026.04").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(one["nodeJsVersion"], "v24.13.1");
    assert_eq!(one["dependencies"]["@playwright/test"], "1.58.2");
    assert_eq!(
        get(&svc, "/v1/runtimes/1999.01").await.0,
        StatusCode::NOT_FOUND
    );
    svc.stop().await;
}
