//! The broker's call context ([`BrokerCtx`]): what a tool call sees on the
//! broker's side, the file tools' context and the broker's settings. It
//! sits beneath the tool table and the shell's broker side, which both take
//! it, and imports none of nib's modules.

use std::ops::Deref;

use nib_files::context::Ctx;
use nib_settings::Config;

/// A call's context on the broker's side: the file tools' context, which
/// holds only what they read of the settings, and the broker's whole
/// [`Config`], which the shell's tools and the providers read (the model,
/// the network, the sandbox's layers). It derefs to the file tools'
/// context, so it is passed as one wherever a file tool takes it.
pub struct BrokerCtx<'a> {
    /// What the file tools see of the call.
    pub files: Ctx<'a>,
    /// The broker's settings.
    pub config: &'a Config,
}

impl<'a> Deref for BrokerCtx<'a> {
    type Target = Ctx<'a>;

    fn deref(&self) -> &Ctx<'a> {
        &self.files
    }
}
