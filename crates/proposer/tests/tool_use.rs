//! Tool conversations against local fake servers that speak OpenAI's and
//! Anthropic's real tool-call formats: scripted multi-turn exchanges
//! (success after a failed compile, budgets spent, malformed calls, a
//! size not offered, loops, a model that never submits). The host here
//! answers by rule and records what it was asked; the real host, on a
//! worker, is tested through the CLI.

mod common;

use std::sync::{Arc, Mutex};

use common::{Fake, Reply, anthropic_ok, openai_ok};
use kevo_proposer::tools::{HostCall, ToolBudget, ToolHost, ToolName, ToolReply, converse};
use kevo_proposer::{Accounting, BoxFuture, ChatRequest, Provider, ProviderError, build_with_env};
use serde_json::{Value, json};

const GOOD: &str = "__kernel void k(__global float* x) { x[0] = 1.0f; }";
const BAD: &str = "__kernel void k(__global float* x) { x[0] = undefined; }";

/// Compiles what has no `undefined` in it; records every call.
#[derive(Default)]
struct RuleHost {
    ran: Mutex<Vec<HostCall>>,
    profiler: bool,
}

impl ToolHost for RuleHost {
    fn sizes(&self) -> Vec<String> {
        vec!["n=1024".into(), "n=4096".into()]
    }
    fn elites(&self) -> usize {
        1
    }
    fn can_profile(&self) -> bool {
        self.profiler
    }
    fn parent_source(&self) -> String {
        GOOD.into()
    }
    fn kernel_file(&self) -> String {
        "kernel.cl".into()
    }
    fn run<'a>(
        &'a self,
        call: &'a HostCall,
        _limit: std::time::Duration,
    ) -> BoxFuture<'a, ToolReply> {
        self.ran.lock().unwrap().push(call.clone());
        let source = match call {
            HostCall::Compile { source } | HostCall::Check { source } => source.as_str(),
            _ => "",
        };
        let failed = source.contains("undefined");
        let text = if failed {
            "error: use of undeclared identifier 'undefined'".to_string()
        } else {
            "compiled: 1 kernel".to_string()
        };
        Box::pin(async move {
            ToolReply {
                text,
                failed,
                device_s: 0.5,
            }
        })
    }
}

impl RuleHost {
    fn ran(&self) -> Vec<HostCall> {
        self.ran.lock().unwrap().clone()
    }
}

fn env(k: &str) -> Option<String> {
    matches!(k, "OPENAI_API_KEY" | "ANTHROPIC_API_KEY").then(|| "sk-test-0123456789".into())
}

fn provider(spec: &str) -> Arc<dyn Provider> {
    build_with_env(spec, &common::fast_config(), &Accounting::new(), &env).unwrap()
}

fn openai(fake: &Fake) -> Arc<dyn Provider> {
    provider(&format!("openai@{}/v1:gpt-5", fake.url()))
}

fn anthropic(fake: &Fake) -> Arc<dyn Provider> {
    provider(&format!("anthropic@{}:claude-opus-4-1", fake.url()))
}

/// An OpenAI answer that calls `name` with `args` (a JSON text, sent as
/// the API sends it: a string).
fn openai_call(id: &str, name: &str, args: &str) -> Reply {
    let mut v = openai_ok("");
    v["choices"][0]["message"] = json!({
        "role": "assistant", "content": null,
        "tool_calls": [{"id": id, "type": "function",
                        "function": {"name": name, "arguments": args}}],
    });
    v["choices"][0]["finish_reason"] = json!("tool_calls");
    Reply::json(v)
}

fn anthropic_call(id: &str, name: &str, input: Value) -> Reply {
    let mut v = anthropic_ok("");
    v["content"] = json!([
        {"type": "thinking", "thinking": "Compile first.", "signature": format!("sig-{id}")},
        {"type": "text", "text": "Let me try it."},
        {"type": "tool_use", "id": id, "name": name, "input": input},
    ]);
    v["stop_reason"] = json!("tool_use");
    Reply::json(v)
}

fn src(s: &str) -> String {
    json!({ "source": s }).to_string()
}

fn req() -> ChatRequest {
    ChatRequest::new("You write kernels.", "Make k faster.")
}

#[tokio::test]
async fn openai_a_failed_compile_then_a_fix_then_submit() {
    let fake = Fake::start(vec![
        openai_call("call_1", "compile", &src(BAD)),
        openai_call("call_2", "check", &src(GOOD)),
        openai_call("call_3", "submit", &src(GOOD)),
    ])
    .await;
    let host = RuleHost::default();
    let (result, transcript) =
        converse(&*openai(&fake), &host, &req(), &ToolBudget::default()).await;
    let answer = result.unwrap();
    assert_eq!(answer.text, format!("```\n{GOOD}\n```\n"));
    assert!(answer.tool_calls.is_empty() && answer.native.is_none());
    // Three turns' tokens (1,200 in and 800 out each) in one answer.
    assert_eq!(answer.usage.input_tokens, 3600);
    assert_eq!(answer.usage.output_tokens, 2400);
    assert_eq!(transcript.calls, 2);
    assert_eq!(transcript.ended, "submitted");
    assert_eq!(transcript.turns.len(), 3);
    assert!(transcript.turns[0].calls[0].is_error);
    assert_eq!(host.ran().len(), 2);

    let seen = fake.seen();
    assert_eq!(seen.len(), 3);
    // Offered in OpenAI's function format; no profiler, no `profile`.
    let tools: Vec<&str> = seen[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert_eq!(t["type"], "function");
            t["function"]["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(tools, ["compile", "check", "time", "show", "submit"]);
    let time = &seen[0].body["tools"][2]["function"]["parameters"];
    assert_eq!(
        time["properties"]["sizes"]["items"]["enum"],
        json!(["n=1024", "n=4096"])
    );
    // The second request carries the first turn and its failed result.
    let messages = seen[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_1");
    assert!(messages[2].get("reasoning_content").is_none());
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "call_1");
    assert!(
        messages[3]["content"]
            .as_str()
            .unwrap()
            .contains("undeclared identifier")
    );
    assert_eq!(seen[2].body["messages"].as_array().unwrap().len(), 6);
}

#[tokio::test]
async fn anthropic_tool_use_returns_its_thinking_blocks_unchanged() {
    let fake = Fake::start(vec![
        anthropic_call("toolu_1", "compile", json!({"source": BAD})),
        anthropic_call("toolu_2", "submit", json!({"source": GOOD})),
    ])
    .await;
    let host = RuleHost {
        profiler: true,
        ..Default::default()
    };
    let (result, transcript) =
        converse(&*anthropic(&fake), &host, &req(), &ToolBudget::default()).await;
    assert_eq!(result.unwrap().text, format!("```\n{GOOD}\n```\n"));
    assert_eq!(transcript.turns[0].text, "Let me try it.");
    assert_eq!(
        transcript.turns[0].reasoning.as_deref(),
        Some("Compile first.")
    );
    let seen = fake.seen();
    let tools: Vec<&str> = seen[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(t["input_schema"].is_object());
            t["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        tools,
        ["compile", "check", "time", "profile", "show", "submit"]
    );
    let messages = seen[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"][0]["signature"], "sig-toolu_1");
    assert_eq!(messages[1]["content"][2]["type"], "tool_use");
    assert_eq!(messages[2]["role"], "user");
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert_eq!(result["is_error"], true);
}

/// The error a conversation ended with, and the host's calls.
async fn ends(replies: Vec<Reply>, budget: ToolBudget) -> (String, Vec<HostCall>, Fake) {
    let fake = Fake::start(replies).await;
    let host = RuleHost::default();
    let (result, transcript) = converse(&*openai(&fake), &host, &req(), &budget).await;
    let error = match result {
        Err(e @ ProviderError::ToolLoop { .. }) => e.to_string(),
        other => panic!("expected the conversation to end without a kernel: {other:?}"),
    };
    assert_eq!(transcript.ended, error);
    (error, host.ran(), fake)
}

fn distinct_checks(n: usize) -> Vec<Reply> {
    (0..n)
        .map(|i| openai_call(&format!("c{i}"), "check", &src(&format!("{GOOD} // {i}"))))
        .collect()
}

#[tokio::test]
async fn a_spent_call_budget_is_said_then_ends_the_proposal() {
    let budget = ToolBudget {
        max_calls: 2,
        ..Default::default()
    };
    let (error, ran, fake) = ends(distinct_checks(10), budget).await;
    assert!(
        error.contains("kept calling tools after the budget was spent"),
        "{error}"
    );
    assert_eq!(ran.len(), 2);
    // The model was told, in the tool result, to submit.
    let last = fake.seen().last().unwrap().body["messages"].clone();
    let told = last.as_array().unwrap().last().unwrap()["content"].clone();
    assert!(
        told.as_str()
            .unwrap()
            .contains("budget of 2 tool calls is spent"),
        "{told}"
    );
}

#[tokio::test]
async fn a_spent_token_budget_ends_the_proposal() {
    let budget = ToolBudget {
        max_tokens: 3000,
        ..Default::default()
    };
    let (error, ran, fake) = ends(distinct_checks(10), budget).await;
    assert!(
        error.contains("4000 tokens") && error.contains("budget of 3000"),
        "{error}"
    );
    assert_eq!((ran.len(), fake.requests()), (2, 2));
}

#[tokio::test]
async fn malformed_calls_are_answered_then_end_the_proposal() {
    let replies = vec![
        openai_call("m1", "check", "{not json"),
        openai_call("m2", "compile", "{}"),
        openai_call("m3", "rm", "{}"),
    ];
    let (error, ran, fake) = ends(replies, ToolBudget::default()).await;
    assert!(
        error.contains("3 malformed tool calls") && error.contains("no tool `rm`"),
        "{error}"
    );
    assert!(ran.is_empty());
    let seen = fake.seen();
    let told = |i: usize| {
        seen[i].body["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(told(1).contains("not JSON"), "{}", told(1));
    assert!(told(2).contains("`source` is missing"), "{}", told(2));
}

#[tokio::test]
async fn a_size_not_offered_is_refused_and_asking_again_ends_the_proposal() {
    let held_out = "n=16777216";
    let ask = |id: &str| {
        openai_call(
            id,
            "time",
            &json!({"source": GOOD, "sizes": [held_out]}).to_string(),
        )
    };
    let (error, ran, fake) = ends(vec![ask("h1"), ask("h2")], ToolBudget::default()).await;
    assert!(
        error.contains("asked 2 times for sizes it is not offered"),
        "{error}"
    );
    assert!(ran.is_empty(), "the host ran {ran:?}");
    let told = fake.seen()[1].body["messages"].as_array().unwrap()[3]["content"].clone();
    assert!(
        told.as_str()
            .unwrap()
            .contains("the sizes are n=1024, n=4096"),
        "{told}"
    );
}

#[tokio::test]
async fn the_same_call_is_answered_once_then_ends_the_proposal_as_a_loop() {
    let same = |id: &str| openai_call(id, "check", &src(GOOD));
    let (error, ran, fake) = ends(
        vec![same("s1"), same("s2"), same("s3")],
        ToolBudget::default(),
    )
    .await;
    assert!(
        error.contains("called `check` with the same arguments 3 times"),
        "{error}"
    );
    assert_eq!(ran.len(), 1);
    let told = fake.seen()[2].body["messages"].as_array().unwrap()[5]["content"].clone();
    assert!(
        told.as_str().unwrap().contains("the same call as before"),
        "{told}"
    );
}

#[tokio::test]
async fn a_model_that_never_submits_is_cut_at_the_turn_limit() {
    let budget = ToolBudget {
        max_calls: 30,
        tools: vec![ToolName::Check],
        ..Default::default()
    };
    let turns = budget.max_turns() as usize;
    // Each kernel checked twice: the repeat is answered without running,
    // so neither the call budget nor the loop rule ends it first.
    let twice: Vec<Reply> = distinct_checks(turns)
        .into_iter()
        .flat_map(|r| [r.clone(), r])
        .collect();
    let (error, ran, fake) = ends(twice, budget).await;
    assert!(error.contains(&format!("within {turns} turns")), "{error}");
    assert_eq!((ran.len(), fake.requests()), (turns.div_ceil(2), turns));
    // Only what the settings name is offered, and `submit`.
    let seen = fake.seen();
    let offered: Vec<&str> = seen[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["check", "submit"]);
}

#[tokio::test]
async fn an_answer_without_a_call_is_taken_as_the_answer() {
    let fake = Fake::start(vec![
        openai_call("c1", "compile", &src(GOOD)),
        Reply::json(openai_ok(&format!("Done.\n```c\n{GOOD}\n```"))),
    ])
    .await;
    let host = RuleHost::default();
    let (result, transcript) =
        converse(&*openai(&fake), &host, &req(), &ToolBudget::default()).await;
    assert!(result.unwrap().text.contains(GOOD));
    assert_eq!(transcript.ended, "answered without submit");
}

/// An OpenAI answer with several calls in one message: (id, name, args).
fn openai_calls(calls: &[(&str, &str, String)]) -> Reply {
    let mut v = openai_ok("");
    let list: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
        })
        .collect();
    v["choices"][0]["message"] = json!({"role": "assistant", "content": null, "tool_calls": list});
    v["choices"][0]["finish_reason"] = json!("tool_calls");
    Reply::json(v)
}

#[tokio::test]
async fn a_turn_that_submits_runs_none_of_its_other_calls() {
    let fake = Fake::start(vec![openai_calls(&[
        ("c1", "check", src(&format!("{GOOD} // a"))),
        ("c2", "submit", src(GOOD)),
        ("c3", "compile", src(BAD)),
    ])])
    .await;
    let host = RuleHost::default();
    let (result, transcript) =
        converse(&*openai(&fake), &host, &req(), &ToolBudget::default()).await;
    assert!(result.unwrap().text.contains(GOOD));
    assert!(host.ran().is_empty(), "{:?}", host.ran());
    assert_eq!(transcript.calls, 0);
    let calls = &transcript.turns[0].calls;
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0].result, "submitted");
    for c in &calls[1..] {
        assert!(
            c.refused
                .as_deref()
                .unwrap()
                .contains("submitted in the same turn")
        );
    }
}

#[tokio::test]
async fn empty_or_repeated_call_ids_are_renumbered_in_the_message_and_its_results() {
    let fake = Fake::start(vec![
        openai_calls(&[("", "compile", src(BAD)), ("", "check", src(GOOD))]),
        openai_call("x", "submit", &src(GOOD)),
    ])
    .await;
    let host = RuleHost::default();
    let (result, _) = converse(&*openai(&fake), &host, &req(), &ToolBudget::default()).await;
    result.unwrap();
    let messages = fake.seen()[1].body["messages"].as_array().unwrap().clone();
    let sent: Vec<&str> = messages[2]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(sent, ["call_1", "call_2"]);
    let answered: Vec<&str> = messages[3..]
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(answered, ["call_1", "call_2"]);

    // Anthropic: two tool_use blocks with one id.
    let mut v = anthropic_ok("");
    v["content"] = json!([
        {"type": "tool_use", "id": "toolu_same", "name": "compile", "input": {"source": BAD}},
        {"type": "tool_use", "id": "toolu_same", "name": "check", "input": {"source": GOOD}},
    ]);
    v["stop_reason"] = json!("tool_use");
    let fake = Fake::start(vec![
        Reply::json(v),
        anthropic_call("toolu_9", "submit", json!({ "source": GOOD })),
    ])
    .await;
    let (result, _) = converse(&*anthropic(&fake), &host, &req(), &ToolBudget::default()).await;
    result.unwrap();
    let messages = fake.seen()[1].body["messages"].as_array().unwrap().clone();
    let ids: Vec<&str> = messages[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_1", "call_2"]);
    let results: Vec<&str> = messages[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["call_1", "call_2"]);
}

#[tokio::test]
async fn a_malformed_submit_is_answered_and_the_rest_of_its_turn_runs() {
    let fake = Fake::start(vec![
        openai_calls(&[
            ("c1", "check", src(GOOD)),
            ("c2", "submit", "{}".to_string()),
        ]),
        openai_call("c3", "submit", &src(GOOD)),
    ])
    .await;
    let host = RuleHost::default();
    let (result, transcript) =
        converse(&*openai(&fake), &host, &req(), &ToolBudget::default()).await;
    assert!(result.unwrap().text.contains(GOOD));
    assert_eq!(host.ran().len(), 1, "the check ran");
    let first = &transcript.turns[0].calls;
    assert_eq!(first.len(), 2);
    assert!(
        first[0].is_error,
        "the submit without a source is refused first"
    );
    assert_eq!(first[1].result, "compiled: 1 kernel");
}
