//! The agent's artifact uploads against a recording server on 127.0.0.1:
//! `PUT /agent/v1/jobs/{jobId}/artifacts/{name}?leaseId=...` with the bytes (the API
//! key masked), the content type and the agent's key; an artifact the service refuses
//! is dropped from the result, which then says why; transient failures are retried.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::put;
use outpost::agent::artifacts::{MAX_TRIES, upload_all};
use outpost::agent::client::ServiceClient;
use outpost::agent::scrub::Scrubber;
use outpost::agent::state::AgentState;
use outpost::agent::{AgentArgs, AgentConfig};
use outpost::executors::netdiag::Artifact;
use outpost::model::{CheckType, Diagnostics, ErrorKind, RunResult};
use outpost::protocol::LeaseRef;
use uuid::Uuid;

const KEY: &str = "pl-agent-key-4711";

/// One upload the server saw.
#[derive(Debug, Clone)]
struct Upload {
    job: String,
    name: String,
    lease: Option<String>,
    auth: Option<String>,
    content_type: Option<String>,
    body: Bytes,
}

#[derive(Clone, Default)]
struct Recorder {
    uploads: Arc<Mutex<Vec<Upload>>>,
}

/// Answers 201, except 404 for `refused.bin` and 503 for `flaky.bin`.
async fn record(
    State(rec): State<Recorder>,
    Path((job, name)): Path<(String, String)>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    rec.uploads.lock().unwrap().push(Upload {
        job,
        name: name.clone(),
        lease: query.get("leaseId").cloned(),
        auth: header("authorization"),
        content_type: header("content-type"),
        body,
    });
    match name.as_str() {
        "refused.bin" => StatusCode::NOT_FOUND,
        "flaky.bin" => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::CREATED,
    }
}

async fn start() -> (String, Recorder) {
    let rec = Recorder::default();
    let app = Router::new()
        .route("/agent/v1/jobs/{job}/artifacts/{name}", put(record))
        .with_state(rec.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), rec)
}

fn client(url: &str) -> ServiceClient {
    let config = AgentConfig::from_args(&AgentArgs {
        api_key: Some(KEY.into()),
        api_url: Some(url.into()),
        ..AgentArgs::default()
    })
    .unwrap();
    ServiceClient::new(&config, Arc::new(AgentState::new(Uuid::new_v4()))).unwrap()
}

fn artifact(name: &str, bytes: &[u8]) -> Artifact {
    Artifact {
        name: name.into(),
        content_type: "application/vnd.tcpdump.pcap".into(),
        bytes: Bytes::copy_from_slice(bytes),
    }
}

fn failed_result(artifacts: &[Artifact]) -> RunResult {
    let mut r = RunResult::errored(
        CheckType::Url,
        chrono::Utc::now(),
        ErrorKind::Connect,
        "cannot connect",
    );
    r.diagnostics = Some(Diagnostics {
        available: true,
        reason: None,
        target: Some("198.51.100.7".into()),
    });
    r.artifacts = artifacts.iter().map(Artifact::reference).collect();
    r
}

#[tokio::test]
async fn artifacts_are_put_with_the_lease_and_the_key_masked() {
    let (url, rec) = start().await;
    let lease = LeaseRef {
        job_id: Uuid::new_v4(),
        lease_id: Uuid::new_v4(),
    };
    // Larger than one upload chunk, with the agent's key inside.
    let mut big = vec![7u8; 200 * 1024];
    big[1000..1000 + KEY.len()].copy_from_slice(KEY.as_bytes());
    let artifacts = vec![
        artifact("capture.pcap", &big),
        artifact("traceroute.json", b"{}"),
    ];
    let mut result = failed_result(&artifacts);
    upload_all(
        &client(&url),
        &Scrubber::new([KEY]),
        lease,
        &mut result,
        artifacts,
    )
    .await;

    let uploads = rec.uploads.lock().unwrap().clone();
    assert_eq!(uploads.len(), 2);
    let pcap = &uploads[0];
    assert_eq!(pcap.job, lease.job_id.to_string());
    assert_eq!(pcap.name, "capture.pcap");
    assert_eq!(
        pcap.lease.as_deref(),
        Some(lease.lease_id.to_string().as_str())
    );
    assert_eq!(pcap.auth.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(
        pcap.content_type.as_deref(),
        Some("application/vnd.tcpdump.pcap")
    );
    assert_eq!(pcap.body.len(), big.len());
    assert!(!pcap.body.windows(KEY.len()).any(|w| w == KEY.as_bytes()));
    assert_eq!(
        &pcap.body[1000..1000 + KEY.len()],
        "*".repeat(KEY.len()).as_bytes()
    );
    assert_eq!(uploads[1].body.as_ref(), b"{}");
    // Both delivered: the result still lists them and has no complaint.
    assert_eq!(result.artifacts.len(), 2);
    assert_eq!(result.diagnostics.unwrap().reason, None);
}

#[tokio::test]
async fn an_artifact_that_cannot_be_uploaded_is_dropped_and_the_result_says_why() {
    let (url, rec) = start().await;
    let lease = LeaseRef {
        job_id: Uuid::new_v4(),
        lease_id: Uuid::new_v4(),
    };
    let artifacts = vec![
        artifact("refused.bin", b"a"),
        artifact("flaky.bin", b"b"),
        artifact("fine.bin", b"c"),
    ];
    let mut result = failed_result(&artifacts);
    upload_all(
        &client(&url),
        &Scrubber::new([KEY]),
        lease,
        &mut result,
        artifacts,
    )
    .await;

    let uploads = rec.uploads.lock().unwrap().clone();
    let tries = |name: &str| uploads.iter().filter(|u| u.name == name).count();
    assert_eq!(tries("refused.bin"), 1, "a 4xx is not retried");
    assert_eq!(tries("flaky.bin"), MAX_TRIES as usize, "a 5xx is retried");
    assert_eq!(tries("fine.bin"), 1);
    let names: Vec<&str> = result.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["fine.bin"]);
    let reason = result.diagnostics.unwrap().reason.unwrap();
    assert!(
        reason.contains("refused.bin") && reason.contains("flaky.bin"),
        "{reason}"
    );
    assert!(!reason.contains(KEY));
}
