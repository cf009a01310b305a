//! Adding and removing a loop's tunnel ends from another thread: the
//! requests a [`Control`] queues, which the loop serves at its next turn.

use super::ends::{
    FrameSink, ReceiverEnd, ReceiverId, ReceiverSpec, SenderEnd, SenderId, SenderSpec, SlotFill,
    XdpId,
};
use crate::xdp::XdpRings;
use std::io;
use std::sync::{Arc, Mutex};

pub(super) enum Command<F, S> {
    AddSender(SenderSpec<F>, std::sync::mpsc::Sender<SenderId>),
    AddReceiver(
        ReceiverSpec<S>,
        std::sync::mpsc::Sender<io::Result<ReceiverId>>,
    ),
    AddXdp(XdpRings, std::sync::mpsc::Sender<io::Result<XdpId>>),
    RemoveXdp(XdpId, std::sync::mpsc::Sender<Option<XdpRings>>),
    RemoveSender(SenderId, std::sync::mpsc::Sender<Option<SenderEnd<F>>>),
    RemoveReceiver(ReceiverId, std::sync::mpsc::Sender<Option<ReceiverEnd<S>>>),
}

pub(super) struct ControlShared<F, S> {
    pub(super) queue: Mutex<Vec<Command<F, S>>>,
    pub(super) waker: crate::runtime::Waker,
}

/// Adds and removes tunnel ends of a loop that another thread runs. Each
/// call is carried out at the loop's next turn (the loop is woken for it)
/// and waits for its answer; it fails if the loop stopped running.
pub struct Control<F, S> {
    pub(super) shared: Arc<ControlShared<F, S>>,
}

impl<F, S> Clone for Control<F, S> {
    fn clone(&self) -> Self {
        Control {
            shared: self.shared.clone(),
        }
    }
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the lane loop is not running")
}

impl<F: SlotFill, S: FrameSink> Control<F, S> {
    fn send<T>(
        &self,
        make: impl FnOnce(std::sync::mpsc::Sender<T>) -> Command<F, S>,
    ) -> io::Result<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.shared.queue.lock().map_err(|_| gone())?.push(make(tx));
        self.shared.waker.wake();
        rx.recv_timeout(std::time::Duration::from_secs(5))
            .map_err(|_| gone())
    }

    /// Adds a sender to the running loop.
    pub fn add_sender(&self, s: SenderSpec<F>) -> io::Result<SenderId> {
        self.send(|tx| Command::AddSender(s, tx))
    }

    /// Adds a receiver to the running loop.
    pub fn add_receiver(&self, r: ReceiverSpec<S>) -> io::Result<ReceiverId> {
        self.send(|tx| Command::AddReceiver(r, tx))?
    }

    /// Adds an AF_XDP path to the running loop.
    pub fn add_xdp(&self, x: XdpRings) -> io::Result<XdpId> {
        self.send(|tx| Command::AddXdp(x, tx))?
    }

    /// Removes an AF_XDP path that no receiver or sender uses any more.
    pub fn remove_xdp(&self, id: XdpId) -> io::Result<Option<XdpRings>> {
        self.send(|tx| Command::RemoveXdp(id, tx))
    }

    /// Removes a sender; its end comes back with what it did.
    pub fn remove_sender(&self, id: SenderId) -> io::Result<Option<SenderEnd<F>>> {
        self.send(|tx| Command::RemoveSender(id, tx))
    }

    /// Removes a receiver; its end comes back with what it saw.
    pub fn remove_receiver(&self, id: ReceiverId) -> io::Result<Option<ReceiverEnd<S>>> {
        self.send(|tx| Command::RemoveReceiver(id, tx))
    }
}
