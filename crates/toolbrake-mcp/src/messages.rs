//! Every text of the MCP proxy that the operator or the model reads (the engines' own
//! texts are in `toolbrake-core`, the failure policy's in `toolbrake-session`).

/// The question of the operator's elicitation form (its message is the engine's ask reason).
pub const ELICIT_QUESTION: &str = "Allow it for the rest of this turn?";

/// Put before the refusal when the client offers no elicitation, so nobody could be asked.
pub const NO_APPROVAL_CHANNEL: &str = "Approval was unavailable: this MCP client cannot ask the operator (it offers no elicitation), so the call was refused.\n\n";

/// The refusal when the operator's answer could not be recorded in the store.
pub const APPROVAL_NOT_RECORDED: &str = "The call was stopped: the approval could not be recorded.";

/// The refusal of a call whose arguments the engines refused (nested too deep, an id
/// reused for another call).
pub fn not_judged(problem: &str) -> String {
    format!("toolbrake could not judge this call: {problem}")
}
