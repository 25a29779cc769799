//! The peer-file handoff of seed 000: `share-file` mints a handle, `fetch-peer-file` redeems one.
//!
//! A capsule that declares `exports.peer_files` may hand one file under its export root to one
//! named peer: the handle is a signed, expiring token bound to the receiving peer's audience, and
//! the file itself never travels until the receiver asks for it on the minting process's door
//! (`GET /<ses_id>/resources/peer/<handle>`). Keeping the bytes at the minter means a handle can
//! be revoked by ending the session, and the path rules are enforced at the moment of serving.
//!
//! Pieces, one concept per file: [`address`] (what a peer is and who may be reached),
//! [`handle`] (the token and its MAC), [`files`] (the path rules under an export root),
//! [`registry`] (the process-wide map the door looks minting sessions up in), [`redeem`] (the
//! minter's side of a fetch), [`share`] and [`fetch`] (the two tool executors), [`card`] (asking
//! a peer's door for its name), [`wiring`] (building both from a manifest).

pub mod address;
pub mod card;
pub mod fetch;
pub mod files;
pub mod handle;
pub mod redeem;
pub mod registry;
pub mod share;
pub mod wiring;

pub use wiring::{peer_executors, PeerTools};
