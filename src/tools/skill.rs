//! Skills: the staged `skill.md` text is the result.

use async_trait::async_trait;
use mur_actors::tool::{
    ExecError, ExecErrorKind, ExecOutput, ExecRequest, ExecResult, ExecStatus, ToolExecutor,
    ToolKind,
};

/// Answers skill calls with the skill's text.
pub struct SkillExecutor;

#[async_trait]
impl ToolExecutor for SkillExecutor {
    async fn execute(&self, request: ExecRequest) -> ExecResult {
        let ToolKind::Skill { path } = &request.tool.kind else {
            return Err(ExecError::new(
                ExecErrorKind::Misrouted,
                format!("tool '{}' is not a skill", request.tool.name),
            ));
        };
        let file = path.clone();
        let read = tokio::task::spawn_blocking(move || {
            crate::files::read_capped(&file, crate::files::SKILL_CAP)
        })
        .await
        .map_err(|e| {
            ExecError::new(
                ExecErrorKind::Failed,
                format!("skill '{}' could not be read: {e}", request.tool.name),
            )
        })?;
        let text = read.map_err(|e| {
            ExecError::new(ExecErrorKind::Failed, {
                format!(
                    "skill '{}' cannot be read from {}: {e}",
                    request.tool.name,
                    path.display()
                )
            })
        })?;
        Ok(ExecOutput {
            status: ExecStatus::Passed,
            text: String::from_utf8_lossy(&text).into_owned(),
            note: None,
            shell: None,
        })
    }
}
