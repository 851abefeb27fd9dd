#!/usr/bin/env bash
# ansible-lint (profile production, offline: the roles use ansible.builtin only) and
# ansible-playbook --syntax-check of ansible/site.yml against the example inventory.
# Installs pinned ansible-core and ansible-lint into .lab/ops/venv on first use.
source "$(dirname "$0")/lib.sh"
ops_ensure_ansible
cd "$OPS_REPO/ansible"

say "ansible-lint $(ansible-lint --nocolor --version 2>/dev/null | head -1)"
if ansible-lint --nocolor --offline --profile production site.yml roles >"$OPS_LAB/ansible-lint.log" 2>&1; then
    say "  PASS  ansible-lint --profile production: $(grep -E '^(Passed|Failed)' "$OPS_LAB/ansible-lint.log")"
else
    cat "$OPS_LAB/ansible-lint.log"
    say "  FAIL  ansible-lint --profile production"
    ops_failures=$((ops_failures + 1))
fi

say "ansible-playbook --syntax-check"
if ansible-playbook --syntax-check -i inventory.example.ini site.yml >"$OPS_LAB/syntax-check.log" 2>&1; then
    say "  PASS  site.yml syntax"
else
    cat "$OPS_LAB/syntax-check.log"
    say "  FAIL  site.yml syntax"
    ops_failures=$((ops_failures + 1))
fi

ops_finish ansible-lint
