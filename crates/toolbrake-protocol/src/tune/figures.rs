//! What one setting did: to the corpus ([`Figures`]) and to one run ([`RunFigures`]). A
//! leaf of `tune`: the judging in `mod.rs` fills them, `recommend` and `render` read them.

/// What one setting did to the corpus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Stopped calls whose recorded output repeated the last identical call's.
    pub waste: u64,
    /// Stopped calls whose recorded output was new: the run lost information.
    pub harmful: u64,
    /// Calls stopped (denied, or asked about and not approved).
    pub stopped: u64,
    /// Sessions with at least one stopped call (asked about or denied).
    pub sessions_stopped: u64,
    /// Sessions.
    pub sessions: u64,
    /// Events in error (an id no call opened, say).
    pub errors: u64,
    /// Calls judged.
    pub calls: u64,
    /// Bytes of the recorded outputs of the calls stopped: output the run would not have
    /// produced (the closest measure of tokens a history holds).
    pub bytes_saved: u64,
    pub(super) first_error: Option<usize>,
}

/// What one setting did to one run (a session with its sub-agents), for calibration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunFigures {
    /// Calls judged in the run.
    pub calls: u32,
    /// Calls stopped.
    pub stopped: u32,
    /// Harmful stops (the recorded output was new).
    pub harmful: u32,
}

impl Figures {
    /// The index of the first event in error (see [`super::Corpus::origin`]).
    pub fn first_error(&self) -> Option<usize> {
        self.first_error
    }
}
