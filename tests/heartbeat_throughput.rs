//! Ping throughput (ignored by default): many clients ping many monitors at once; every
//! answered ping is committed (group commit). The client shares the process and its
//! cores with the service, so the figure is a floor, not the benchmark.
//!
//! CARGO_TARGET_DIR=... cargo test --test heartbeat_throughput -- --ignored --nocapture

mod heartbeat_support;
mod service_support;

use std::time::Instant;

use heartbeat_support::{create_heartbeat, events, heartbeat_body, id_and_url};
use service_support::TestService;

const MONITORS: usize = 200;
const CLIENTS: usize = 64;
const PINGS_PER_CLIENT: usize = 250;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn durable_pings_per_second() {
    let svc = TestService::start().await;
    let mut urls = Vec::new();
    let mut ids = Vec::new();
    for i in 0..MONITORS {
        let (id, url) =
            id_and_url(&create_heartbeat(&svc, heartbeat_body(&format!("t{i}"), 3600, 0)).await);
        ids.push(id);
        urls.push(url);
    }
    let start = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let urls = urls.clone();
        clients.spawn(async move {
            for n in 0..PINGS_PER_CLIENT {
                let url = &urls[(c * PINGS_PER_CLIENT + n) % urls.len()];
                let resp = http.post(url).send().await.unwrap();
                assert_eq!(resp.status(), 200);
            }
        });
    }
    while let Some(done) = clients.join_next().await {
        done.unwrap();
    }
    let elapsed = start.elapsed();
    let total = CLIENTS * PINGS_PER_CLIENT;
    println!(
        "{total} durable pings in {:.3}s = {:.0} pings/s",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );
    let mut recorded = 0;
    for id in &ids {
        recorded +=
            events(&svc, id, "").await["stats"]["last24Hours"]["totalEntitiesCurrentPeriod"]
                .as_i64()
                .unwrap();
    }
    assert_eq!(recorded as usize, total);
    svc.stop().await;
}
