// Evaluates systemd/demeter-agent.polkit.rules the way polkitd does (polkit.addRule with
// action/subject objects) against a table of requests; exits 1 on any unexpected answer.
// Run by tests/ops/systemd.sh: node tests/ops/polkit-rule.js systemd/demeter-agent.polkit.rules
"use strict";
const fs = require("fs");
const vm = require("vm");

const Result = { YES: "yes", NO: "no", NOT_HANDLED: null };
const rules = [];
const polkit = { Result, addRule: (rule) => rules.push(rule), log: () => {} };
vm.runInNewContext(fs.readFileSync(process.argv[2], "utf8"), { polkit });

function decide(user, actionId, unit, verb) {
    const details = { unit, verb };
    const action = { id: actionId, lookup: (key) => details[key] };
    const subject = { user, local: false, active: false };
    for (const rule of rules) {
        const answer = rule(action, subject);
        if (answer !== Result.NOT_HANDLED && answer !== undefined) return answer;
    }
    return "not handled";
}

const MANAGE = "org.freedesktop.systemd1.manage-units";
const cases = [
    ["demeter", MANAGE, "flink-taskmanager@tm-1.service", "start", "yes"],
    ["demeter", MANAGE, "flink-taskmanager@prof-42.service", "stop", "yes"],
    ["demeter", MANAGE, "flink-taskmanager@tm-1.service", "restart", "yes"],
    ["demeter", MANAGE, "flink-taskmanager@tm-1.service", "try-restart", "yes"],
    ["demeter", MANAGE, "flink-taskmanager@tm-1.service", "kill", "yes"],
    ["demeter", MANAGE, "flink-taskmanager@tm-1.service", "reset-failed", "yes"],
    ["demeter", MANAGE, "flink-taskmanager@tm-1.service", "set-property", "yes"],
    ["demeter", MANAGE, "flink-taskmanager@tm-1.service", "reload", "not handled"],
    ["demeter", MANAGE, "flink-jobmanager.service", "stop", "not handled"],
    ["demeter", MANAGE, "sshd.service", "stop", "not handled"],
    ["demeter", MANAGE, "flink-taskmanager@.service", "start", "not handled"],
    ["demeter", MANAGE, "flink-taskmanager@a.service.d", "start", "not handled"],
    ["demeter", MANAGE, "xflink-taskmanager@tm-1.service", "start", "not handled"],
    ["demeter", MANAGE, "flink-taskmanager@tm-1.socket", "start", "not handled"],
    ["demeter", "org.freedesktop.systemd1.manage-unit-files", "flink-taskmanager@tm-1.service", "enable", "not handled"],
    ["demeter", "org.freedesktop.systemd1.reload-daemon", undefined, undefined, "not handled"],
    ["flink", MANAGE, "flink-taskmanager@tm-1.service", "start", "not handled"],
    ["nobody", MANAGE, "flink-taskmanager@tm-1.service", "stop", "not handled"],
];

let failed = 0;
for (const [user, actionId, unit, verb, expected] of cases) {
    const got = decide(user, actionId, unit, verb);
    const ok = got === expected;
    if (!ok) failed += 1;
    console.log(`  ${ok ? "PASS" : "FAIL"}  ${user} ${actionId.split(".").pop()} ${unit} ${verb} -> ${got}`);
}
process.exit(failed === 0 ? 0 : 1);
