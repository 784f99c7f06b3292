//! Composite toolsets, presets and legacy names.
//!
//! A tool's own toolset comes from its `#[tool(toolset = "...")]`; this file adds the
//! bundles built from several toolsets. Tools that presets name but this build does
//! not have yet are listed under `planned`: they are skipped until a file in tools/
//! provides them, and then join every bundle here with no further edit.

use hermes_runtime::prelude::toolsets;

toolsets! {
    planned [
        web_search, web_extract, x_search, vision_analyze, video_analyze, image_generate,
        video_generate, xai_video_edit, xai_video_extend, computer_use, terminal, process,
        send_message, manage_connections,
        browser_navigate, browser_snapshot, browser_click, browser_type, browser_scroll,
        browser_back, browser_press, browser_get_images, browser_vision, browser_console,
        browser_cdp, browser_dialog, browser_vault_list, browser_vault_unlock,
        browser_vault_fill, browser_vault_save_login, browser_vault_enter_code, browser_exec,
        ha_list_entities, ha_get_state, ha_list_services, ha_call_service,
        kanban_show, kanban_list, kanban_complete, kanban_block, kanban_request_review,
        kanban_request_changes, kanban_heartbeat, kanban_comment, kanban_create, kanban_link,
        kanban_unblock, kanban_attach, kanban_attach_url, kanban_attachments,
        discord, discord_admin,
        feishu_doc_read, feishu_drive_list_comments, feishu_drive_list_comment_replies,
        feishu_drive_reply_comment, feishu_drive_add_comment,
        yb_query_group_info, yb_query_group_members, yb_send_dm, yb_search_sticker, yb_send_sticker,
    ];

    const BROWSER = [
        browser_navigate, browser_snapshot, browser_click, browser_type, browser_scroll,
        browser_back, browser_press, browser_get_images, browser_vision, browser_console,
        browser_cdp, browser_dialog, browser_vault_list, browser_vault_unlock,
        browser_vault_fill, browser_vault_save_login, browser_vault_enter_code, browser_exec,
    ];
    const KANBAN = [
        kanban_show, kanban_list, kanban_complete, kanban_block, kanban_request_review,
        kanban_request_changes, kanban_heartbeat, kanban_comment, kanban_create, kanban_link,
        kanban_unblock, kanban_attach, kanban_attach_url, kanban_attachments,
    ];
    const HOME_ASSISTANT = [ha_list_entities, ha_get_state, ha_list_services, ha_call_service];
    const FEISHU = [
        feishu_doc_read, feishu_drive_list_comments, feishu_drive_list_comment_replies,
        feishu_drive_reply_comment, feishu_drive_add_comment,
    ];
    const YUANBAO = [yb_query_group_info, yb_query_group_members, yb_send_dm, yb_search_sticker, yb_send_sticker];
    // What untrusted webhook payloads may reach: nothing that touches files or runs code.
    const WEBHOOK_SAFE = [web_search, web_extract, vision_analyze, clarify];
    // What every interactive preset starts from. Tools gated by a check (Home Assistant,
    // kanban, computer use, send_message) are listed and hidden where the check fails.
    const CORE = [
        web_search, web_extract, terminal, process, read_file, write_file, patch, search_files,
        vision_analyze, image_generate, skills_list, skill_view, skill_manage,
    ] + BROWSER + [
        text_to_speech, todo, memory, session_search, clarify, execute_code, delegate_task,
        cronjob, send_message,
    ] + HOME_ASSISTANT + KANBAN + [computer_use, manage_connections];
    const CODING = CORE - [image_generate, text_to_speech, cronjob, computer_use, send_message] - HOME_ASSISTANT - KANBAN;

    /// Web search and page extraction.
    toolset "web" { tools: [web_search, web_extract] }
    /// Web search only.
    toolset "search" { tools: [web_search] }
    /// Search of posts on X; off by default, needs xAI credentials.
    toolset "x_search" { tools: [x_search] }
    /// Image understanding through a vision-capable model.
    toolset "vision" { tools: [vision_analyze] }
    /// Video understanding; opt-in.
    toolset "video" { tools: [video_analyze] }
    /// Image generation.
    toolset "image_gen" { tools: [image_generate] }
    /// Video generation and editing.
    toolset "video_gen" { tools: [video_generate, xai_video_edit, xai_video_extend] }
    /// Desktop control by screenshots and input events.
    toolset "computer_use" { tools: [computer_use] }
    /// Shell commands and the background processes they start.
    toolset "terminal" { tools: [terminal, process] }
    /// Reusable skills: list, view and manage them.
    toolset "skills" { tools: [skills_list, skill_view, skill_manage] }
    /// A real browser driven by the model.
    toolset "browser" { tools: BROWSER }
    /// Scheduled jobs that run prompts later or repeatedly.
    toolset "cronjob" { tools: [cronjob] }
    /// Messages to chat platforms through the gateway.
    toolset "messaging" { tools: [send_message] }
    /// Read, write, patch and search files in the task's working directory.
    toolset "file" { tools: [read_file, write_file, patch, search_files] }
    /// Text to speech.
    toolset "tts" { tools: [text_to_speech] }
    /// The agent's own task list.
    toolset "todo" { tools: [todo] }
    /// Notes the agent keeps about its work and its user across sessions.
    toolset "memory" { tools: [memory] }
    /// Search over past sessions.
    toolset "session_search" { tools: [session_search] }
    /// Connectors to outside services.
    toolset "connections" { tools: [manage_connections] }
    /// Questions back to the user.
    toolset "clarify" { tools: [clarify] }
    /// Python scripts that call the other tools.
    toolset "code_execution" { tools: [execute_code] }
    /// Sub-agents for separate goals.
    toolset "delegation" { tools: [delegate_task] }
    /// Home Assistant entities and services.
    toolset "homeassistant" { tools: HOME_ASSISTANT }
    /// Work items for dispatcher-spawned workers.
    toolset "kanban" { tools: KANBAN }
    /// Discord actions of the bot.
    toolset "discord" { tools: [discord] }
    /// Discord server administration.
    toolset "discord_admin" { tools: [discord_admin] }
    /// Yuanbao groups, direct messages and stickers.
    toolset "yuanbao" { tools: YUANBAO }
    /// Feishu documents.
    toolset "feishu_doc" { tools: [feishu_doc_read] }
    /// Feishu drive comments.
    toolset "feishu_drive" { tools: [feishu_drive_list_comments, feishu_drive_list_comment_replies, feishu_drive_reply_comment, feishu_drive_add_comment] }

    /// Shell, processes, web and files: what debugging a system needs.
    toolset "debugging" { tools: [terminal, process], includes: ["web", "file"] }
    /// Tools that cannot change the machine: web, vision and image generation.
    toolset "safe" { includes: ["web", "vision", "image_gen"] }
    /// A posture for coding work: the core without media, scheduling and platform tools.
    toolset "coding" { tools: CODING, posture: true }

    /// Preset of the interactive command line.
    toolset "hermes-cli" { tools: CORE }
    /// Preset of scheduled runs.
    toolset "hermes-cron" { tools: CORE }
    /// Preset of editor integrations: coding tools without questions to the user.
    toolset "hermes-acp" { tools: CODING - [clarify] }
    /// Preset of the OpenAI-compatible API server.
    toolset "hermes-api-server" { tools: CORE - [text_to_speech, clarify, computer_use, send_message] - KANBAN }
    /// Preset of webhook-triggered runs: untrusted input, so no files and no shell.
    toolset "hermes-webhook" { tools: WEBHOOK_SAFE }
    /// Preset of the Telegram gateway.
    toolset "hermes-telegram" { tools: CORE }
    /// Preset of the WhatsApp gateway.
    toolset "hermes-whatsapp" { tools: CORE }
    /// Preset of the Slack gateway.
    toolset "hermes-slack" { tools: CORE }
    /// Preset of the Signal gateway.
    toolset "hermes-signal" { tools: CORE }
    /// Preset of the BlueBubbles (iMessage) gateway.
    toolset "hermes-bluebubbles" { tools: CORE }
    /// Preset of the Home Assistant gateway.
    toolset "hermes-homeassistant" { tools: CORE }
    /// Preset of the email gateway.
    toolset "hermes-email" { tools: CORE }
    /// Preset of the Mattermost gateway.
    toolset "hermes-mattermost" { tools: CORE }
    /// Preset of the Matrix gateway.
    toolset "hermes-matrix" { tools: CORE }
    /// Preset of the DingTalk gateway.
    toolset "hermes-dingtalk" { tools: CORE }
    /// Preset of the Weixin gateway.
    toolset "hermes-weixin" { tools: CORE }
    /// Preset of the QQ bot gateway.
    toolset "hermes-qqbot" { tools: CORE }
    /// Preset of the WeCom gateway.
    toolset "hermes-wecom" { tools: CORE }
    /// Preset of the WeCom callback gateway.
    toolset "hermes-wecom-callback" { tools: CORE }
    /// Preset of the SMS gateway.
    toolset "hermes-sms" { tools: CORE }
    /// Preset of the Discord gateway: the core plus Discord's own tools.
    toolset "hermes-discord" { tools: CORE + [discord, discord_admin] }
    /// Preset of the Feishu gateway: the core plus Feishu documents and comments.
    toolset "hermes-feishu" { tools: CORE + FEISHU }
    /// Preset of the Yuanbao gateway: the core plus Yuanbao's tools.
    toolset "hermes-yuanbao" { tools: CORE + YUANBAO }
    /// Every gateway platform at once.
    toolset "hermes-gateway" {
        includes: [
            "hermes-telegram", "hermes-discord", "hermes-whatsapp", "hermes-slack", "hermes-signal",
            "hermes-bluebubbles", "hermes-homeassistant", "hermes-email", "hermes-sms",
            "hermes-mattermost", "hermes-matrix", "hermes-dingtalk", "hermes-feishu", "hermes-wecom",
            "hermes-wecom-callback", "hermes-weixin", "hermes-qqbot", "hermes-webhook", "hermes-yuanbao",
        ],
    }

    // Old names whose meaning differs from `<toolset>_tools`.
    legacy "terminal_tools" = [terminal];
    legacy "vision_tools" = [vision_analyze];
    legacy "image_tools" = [image_generate];
    legacy "browser_tools" = [
        browser_navigate, browser_snapshot, browser_click, browser_type, browser_scroll,
        browser_back, browser_press, browser_get_images, browser_vision, browser_console,
    ];
}
