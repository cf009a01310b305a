//! The daemon side: hands a fresh bridge pair to every application that
//! connects to a UNIX stream socket, and notices when one goes away.
//!
//! Nothing here runs on the lane thread. The daemon's control thread calls
//! [`BridgeServer::poll_accept`] and [`BridgeServer::poll_hangups`] (both
//! non-blocking; the listening socket is available through [`AsFd`] for a
//! `poll(2)` loop) and passes each [`LaneEnd`] on to the lane thread, which
//! only ever touches the rings.

use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::{AcceptError, BindError, Direction};
use super::handshake;
use super::layout::{RingConfig, CONSUMER_CLOSED, PRODUCER_CLOSED};
use super::ring::{Consumer, Producer, Ring, Shared};

/// What every bridge pair handed out by a [`BridgeServer`] looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BridgeServerConfig {
    /// The R-X ring (application → lane).
    pub to_lane: RingConfig,
    /// The X-R ring (lane → application).
    pub to_app: RingConfig,
    /// Most applications served at once; further connections are closed.
    pub max_clients: usize,
}

impl Default for BridgeServerConfig {
    fn default() -> Self {
        BridgeServerConfig {
            to_lane: RingConfig::default(),
            to_app: RingConfig::default(),
            max_clients: 64,
        }
    }
}

/// The lane's side of one application's bridge pair.
#[derive(Debug)]
pub struct LaneEnd {
    /// The connection id (also sent to the application in the hello).
    pub id: u64,
    /// Reading end of the R-X ring: what the application sends.
    pub from_app: Consumer,
    /// Writing end of the X-R ring: what the application receives.
    pub to_app: Producer,
}

/// One application being watched for hangup.
struct Watch {
    id: u64,
    stream: UnixStream,
    to_lane: Arc<Shared>,
    to_app: Arc<Shared>,
}

/// Listens on a UNIX stream socket and gives every connecting application
/// its own pair of rings (memfds passed with `SCM_RIGHTS`).
///
/// The socket file is removed when the server is dropped (if it is still
/// the one this server created). Dropping the server closes every
/// connection, which the applications see as [`PeerGone`](super::RecvError::PeerGone).
pub struct BridgeServer {
    listener: UnixListener,
    path: PathBuf,
    ident: Option<(u64, u64)>,
    cfg: BridgeServerConfig,
    watches: Vec<Watch>,
    next_id: u64,
}

impl std::fmt::Debug for BridgeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeServer")
            .field("path", &self.path)
            .field("cfg", &self.cfg)
            .field("clients", &self.watches.len())
            .finish()
    }
}

impl BridgeServer {
    /// Listens at `path` (e.g. `/run/xlane/<name>.sock`), creating its
    /// directory if needed. A stale socket file (nobody listening) is
    /// replaced; a live one is [`BindError::AddrInUse`]. Any other file at
    /// `path` is left alone and reported.
    pub fn bind(path: impl AsRef<Path>, cfg: BridgeServerConfig) -> Result<Self, BindError> {
        let path = path.as_ref().to_path_buf();
        for (direction, ring) in [
            (Direction::RegularToExpress, cfg.to_lane),
            (Direction::ExpressToRegular, cfg.to_app),
        ] {
            ring.geometry()
                .map_err(|source| BindError::Config { direction, source })?;
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|source| BindError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let listen_err = |source| BindError::Listen {
            path: path.clone(),
            source,
        };
        let listener = match UnixListener::bind(&path) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                let is_socket = fs::symlink_metadata(&path)
                    .map(|m| m.file_type().is_socket())
                    .unwrap_or(false);
                if !is_socket {
                    return Err(listen_err(e));
                }
                if UnixStream::connect(&path).is_ok() {
                    return Err(BindError::AddrInUse { path });
                }
                // Stale socket of a dead server.
                fs::remove_file(&path).map_err(listen_err)?;
                UnixListener::bind(&path).map_err(listen_err)?
            }
            Err(e) => return Err(listen_err(e)),
        };
        listener.set_nonblocking(true).map_err(listen_err)?;
        let ident = fs::symlink_metadata(&path).ok().map(|m| (m.dev(), m.ino()));
        Ok(BridgeServer {
            listener,
            path,
            ident,
            cfg,
            watches: Vec::new(),
            next_id: 1,
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The configuration.
    pub fn config(&self) -> &BridgeServerConfig {
        &self.cfg
    }

    /// Applications currently served.
    pub fn clients(&self) -> usize {
        self.watches.len()
    }

    /// Accepts one pending application, if any, without blocking: creates
    /// its two rings, sends it the hello with both memfds, and returns the
    /// lane's ends. `Ok(None)` when nobody is waiting; call again until
    /// then to accept every pending connection.
    ///
    /// An error concerns one connection only (which has been closed); the
    /// server stays usable.
    pub fn poll_accept(&mut self) -> Result<Option<LaneEnd>, AcceptError> {
        let stream = loop {
            match self.listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(AcceptError::Accept(e)),
            }
        };
        if self.watches.len() >= self.cfg.max_clients {
            return Err(AcceptError::TooManyClients {
                max: self.cfg.max_clients,
            });
        }
        let id = self.next_id;
        self.next_id += 1;
        let to_lane =
            Ring::create(&format!("xlane-bridge-{id}-rx"), self.cfg.to_lane).map_err(|source| {
                AcceptError::CreateRing {
                    direction: Direction::RegularToExpress,
                    source,
                }
            })?;
        let to_app =
            Ring::create(&format!("xlane-bridge-{id}-xr"), self.cfg.to_app).map_err(|source| {
                AcceptError::CreateRing {
                    direction: Direction::ExpressToRegular,
                    source,
                }
            })?;
        handshake::offer(&stream, id, to_lane.fd(), to_app.fd()).map_err(AcceptError::Handshake)?;
        self.watches.push(Watch {
            id,
            stream,
            to_lane: to_lane.shared(),
            to_app: to_app.shared(),
        });
        Ok(Some(LaneEnd {
            id,
            from_app: to_lane.into_consumer(),
            to_app: to_app.into_producer(),
        }))
    }

    /// Checks every connection without blocking (one `recv` each) and
    /// returns the ids of the applications that are gone:
    ///
    /// - the application's socket is closed (it exited or crashed): its
    ///   rings are marked closed on its behalf, so the lane's
    ///   [`Consumer`] and [`Producer`] report `PeerGone` (after draining);
    /// - the lane dropped both its ends: the connection is closed, so the
    ///   application learns it too.
    pub fn poll_hangups(&mut self) -> Vec<u64> {
        let mut gone = Vec::new();
        self.watches.retain(|w| {
            let lane_done =
                w.to_lane.is_marked(CONSUMER_CLOSED) && w.to_app.is_marked(PRODUCER_CLOSED);
            let app_gone = !handshake::peer_alive(&w.stream);
            if app_gone {
                w.to_lane.mark(PRODUCER_CLOSED);
                w.to_app.mark(CONSUMER_CLOSED);
            }
            if app_gone || lane_done {
                gone.push(w.id);
                false
            } else {
                true
            }
        });
        gone
    }
}

impl AsFd for BridgeServer {
    /// The listening socket: readable when an application is waiting.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.listener.as_fd()
    }
}

impl Drop for BridgeServer {
    fn drop(&mut self) {
        let still_ours = fs::symlink_metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()))
            .is_some_and(|id| Some(id) == self.ident);
        if still_ours {
            let _ = fs::remove_file(&self.path);
        }
    }
}
