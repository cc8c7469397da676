//! Packet capture of one attempt: an `AF_PACKET` socket (cooked, `SOCK_DGRAM`: packets
//! start at the IP header, on every interface) read on a blocking thread, packets kept
//! when the [`PacketFilter`] says they belong to the attempt, written as a pcap file
//! (link type RAW) with the `pcap-file` crate. Bounded in size ([`MAX_PCAP_BYTES`]) and
//! in time (the caller stops it).
//!
//! Opening the socket needs `CAP_NET_RAW`; without it [`open`] fails with
//! `PermissionDenied`, which the caller reports as "diagnostics unavailable".

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use socket2::{Domain, Protocol, Socket, Type};

use super::packet_filter::PacketFilter;

/// Largest pcap file kept (header included); packets past it are counted, not kept.
pub const MAX_PCAP_BYTES: usize = 1024 * 1024;
/// Bytes of one packet kept (and read).
const SNAPLEN: usize = 65_535;
/// How often the reading thread looks at the stop flag while no packet comes.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// `ETH_P_ALL`: every protocol.
const ETH_P_ALL: u16 = 0x0003;
/// Bytes of the pcap file header and of each packet record header.
const FILE_HEADER_BYTES: usize = 24;
const RECORD_HEADER_BYTES: usize = 16;

/// Opens the capture socket. `PermissionDenied` means the process lacks `CAP_NET_RAW`.
pub(crate) fn open() -> io::Result<Socket> {
    let protocol = Protocol::from(i32::from(ETH_P_ALL.to_be()));
    let socket = Socket::new(Domain::PACKET, Type::DGRAM, Some(protocol))?;
    socket.set_read_timeout(Some(POLL_INTERVAL))?;
    Ok(socket)
}

/// What a capture kept.
#[derive(Debug)]
pub(crate) struct Captured {
    /// The pcap file.
    pub(crate) pcap: Vec<u8>,
    /// Packets in the file.
    pub(crate) packets: usize,
    /// Matching packets left out because the file reached [`MAX_PCAP_BYTES`].
    pub(crate) dropped: usize,
}

/// A capture running on a blocking thread until [`Capture::finish`].
pub(crate) struct Capture {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<io::Result<Captured>>,
}

impl Capture {
    /// Starts reading `socket` (from [`open`]), keeping packets `filter` matches.
    pub(crate) fn start(socket: Socket, filter: PacketFilter) -> Capture {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::task::spawn_blocking(move || read_packets(&socket, &filter, &flag));
        Capture { stop, task }
    }

    /// Stops the capture once the packets already received are read, and returns them.
    pub(crate) async fn finish(self) -> io::Result<Captured> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.map_err(io::Error::other)?
    }
}

/// Reads packets until `stop` is set and the socket has nothing more to give.
fn read_packets(socket: &Socket, filter: &PacketFilter, stop: &AtomicBool) -> io::Result<Captured> {
    let header = PcapHeader {
        snaplen: SNAPLEN as u32,
        datalink: DataLink::RAW,
        ts_resolution: TsResolution::MicroSecond,
        endianness: Endianness::native(),
        ..PcapHeader::default()
    };
    let mut writer = PcapWriter::with_header(Vec::new(), header).map_err(io::Error::other)?;
    let mut size = FILE_HEADER_BYTES;
    let mut packets = 0;
    let mut dropped = 0;
    let mut buf = vec![0u8; SNAPLEN];
    let mut reader = socket;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping {
            // Read what is queued without waiting for more.
            socket.set_nonblocking(true)?;
        }
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if stopping {
                    break;
                }
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let packet = &buf[..n];
        if !filter.matches(packet) {
            continue;
        }
        if size + RECORD_HEADER_BYTES + n > MAX_PCAP_BYTES {
            dropped += 1;
            continue;
        }
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let record = PcapPacket::new(at, n as u32, packet);
        writer.write_packet(&record).map_err(io::Error::other)?;
        size += RECORD_HEADER_BYTES + n;
        packets += 1;
    }
    Ok(Captured {
        pcap: writer.into_writer(),
        packets,
        dropped,
    })
}
