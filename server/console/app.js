// The wasmhooks operator console. Plain JavaScript, no build step, served
// with a Content-Security-Policy that forbids inline script.
//
// SECURITY: approvals, traces and audit records carry text written by hooks
// and their users. Data reaches the page only as text: through el() below
// (textContent / text nodes, attributes by setAttribute from a fixed list),
// never innerHTML, outerHTML, insertAdjacentHTML or document.write, and
// never as a URL (no href or src is ever built from data).
'use strict';

(function () {
  const KEY = 'wasmhooks.key';
  const ATTRS = ['id', 'type', 'title', 'placeholder', 'rows', 'cols', 'size', 'for', 'role', 'hidden', 'disabled',
    'aria-current', 'aria-label', 'autocomplete', 'spellcheck'];
  let me = null; // {key_id, role, tenant}
  let current = '';

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = String(v);
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k.startsWith('data-') || ATTRS.includes(k)) e.setAttribute(k, v === true ? '' : String(v));
      else throw new Error('el: attribute ' + k + ' is not allowed');
    }
    return add(e, ...children);
  }

  // add appends children to e: nodes as they are, anything else as text;
  // arrays are flattened, and null, undefined and false are skipped.
  function add(e, ...children) {
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  const $ = (id) => document.getElementById(id);
  const seg = encodeURIComponent;
  const json = (v) => JSON.stringify(v, null, 2);

  function status(msg, isError) {
    const s = $('status');
    s.textContent = msg || '';
    s.className = isError ? 'error' : '';
  }

  async function api(method, path, body) {
    const headers = { Authorization: 'Bearer ' + (sessionStorage.getItem(KEY) || '') };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const r = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store', credentials: 'omit', redirect: 'error',
    });
    const text = await r.text();
    let doc = null;
    try { doc = text ? JSON.parse(text) : null; } catch (e) { doc = null; }
    if (!r.ok) {
      const err = new Error(doc && doc.code ? doc.code + ': ' + (doc.detail || doc.title) : r.status + ' ' + r.statusText);
      err.status = r.status;
      if (r.status === 401) signOut('The key was refused: ' + err.message);
      throw err;
    }
    return doc;
  }

  const tenantPath = (rest) => '/v1/tenants/' + seg(me.tenant) + rest;

  function dl(pairs) {
    return el('dl', null, pairs.filter((p) => p[1] !== undefined && p[1] !== null && p[1] !== '')
      .map(([k, v]) => [el('dt', { text: k }), el('dd', null, v)]));
  }

  function table(head, rows) {
    return el('table', null,
      el('thead', null, el('tr', null, head.map((h) => el('th', { text: h })))),
      el('tbody', null, rows.map((r) => el('tr', null, r.map((c) => el('td', null, c))))));
  }

  function pre(v, cls) { return el('pre', { class: cls, text: typeof v === 'string' ? v : json(v) }); }

  function mark(ok, yes, no) { return el('span', { class: ok ? 'ok' : 'bad', text: ok ? yes : no }); }

  // ---- sign-in ----

  function signOut(msg) {
    sessionStorage.removeItem(KEY);
    me = null;
    location.hash = '';
    $('nav').hidden = true;
    $('signout').hidden = true;
    $('whoami').textContent = '';
    showSignIn();
    status(msg || '', !!msg);
  }

  function showSignIn() {
    const input = el('input', { type: 'password', id: 'key', autocomplete: 'off', spellcheck: 'false', size: 60 });
    const form = el('form', { id: 'signin-form' },
      el('h2', { text: 'Sign in' }),
      el('p', { text: 'Paste an API key. It is kept in this tab only (sessionStorage) and sent to this server as a Bearer token.' }),
      el('label', { for: 'key', text: 'API key ' }), input, ' ',
      el('button', { type: 'submit', id: 'signin', text: 'Sign in' }));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const key = input.value.trim();
      if (!key) return;
      sessionStorage.setItem(KEY, key);
      start();
    });
    $('view').replaceChildren(form);
  }

  const VIEWS = {
    operator: [['approvals', 'Approvals'], ['runs', 'Runs'], ['audit', 'Audit'], ['hooks', 'Hooks'], ['usage', 'Credit & usage']],
    admin: [['tenants', 'Tenants']],
    publisher: [['versions', 'Versions']],
    runtime: [],
  };

  async function start() {
    try {
      me = await api('GET', '/v1/me');
    } catch (e) {
      if (e.status !== 401) signOut('Sign-in failed: ' + e.message);
      return;
    }
    $('whoami').textContent = me.role + (me.tenant ? ' of ' + me.tenant : '') + ' (' + me.key_id + ')';
    $('signout').hidden = false;
    const nav = $('nav');
    nav.replaceChildren(...(VIEWS[me.role] || []).map(([id, label]) =>
      el('button', { type: 'button', 'data-view': id, text: label, onclick: () => go(id) })));
    nav.hidden = false;
    status('');
    const views = VIEWS[me.role] || [];
    if (views.length === 0) {
      $('view').replaceChildren(el('p', { id: 'no-views', text: 'A ' + me.role + ' key has no console views: it is for the API.' }));
      return;
    }
    const want = location.hash.slice(1).split('/')[0];
    go(views.some((v) => v[0] === want) ? want : views[0][0], location.hash.slice(1).split('/').slice(1).join('/'));
  }

  async function go(view, arg) {
    current = view;
    for (const b of $('nav').children) b.setAttribute('aria-current', b.dataset.view === view ? 'page' : 'false');
    const page = el('section', { id: 'page-' + view });
    $('view').replaceChildren(page);
    try {
      await RENDER[view](page, arg ? decodeURIComponent(arg) : '');
    } catch (e) {
      status(e.message, true);
    }
  }

  // ---- approvals ----

  async function approvals(page, which) {
    which = which === 'resolved' ? 'resolved' : 'pending';
    location.hash = 'approvals/' + which;
    const list = el('div', { id: 'approvals' });
    add(page, el('h2', { text: 'Approvals' }),
      el('div', { class: 'actions' },
        el('button', { type: 'button', id: 'show-pending', 'aria-current': which === 'pending' ? 'page' : 'false', text: 'Pending', onclick: () => go('approvals', 'pending') }),
        el('button', { type: 'button', id: 'show-resolved', 'aria-current': which === 'resolved' ? 'page' : 'false', text: 'Resolved', onclick: () => go('approvals', 'resolved') }),
        el('button', { type: 'button', id: 'refresh', text: 'Refresh', onclick: () => go('approvals', which) })),
      list);
    const doc = await api('GET', tenantPath('/approvals?status=' + which));
    if (doc.approvals.length === 0) add(list, el('p', { class: 'empty', text: 'No ' + which + ' approvals.' }));
    for (const a of doc.approvals) add(list, approvalCard(a));
  }

  function approvalCard(a) {
    const card = el('article', { class: 'approval ' + a.status, 'data-id': a.id });
    const result = el('div', { class: 'result' });
    add(card, el('div', { class: 'body' },
      el('h3', null, a.binding, ' at ', a.point),
      dl([['Approval', a.id], ['Status', a.status],
        ['Run', el('button', { type: 'button', class: 'open-run', text: a.run, onclick: () => go('runs', a.run) })],
        ['Reason', a.reason], ['Message for the user', a.user_message],
        ['Created', a.created], ['Expires', a.expires],
        ['Editable', (a.editable || []).join(', ') || 'nothing']]),
      el('h4', { text: 'Proposed' }), pre(a.proposed, 'proposed'),
      a.pending ? [el('h4', { text: 'Pending' }), pre(a.pending, 'pending')] : null));
    if (a.status === 'pending') add(card, resolveControls(a, card, result));
    add(card, result);
    return card;
  }

  function resolveControls(a, card, result) {
    const reason = el('input', { type: 'text', class: 'reason', placeholder: 'note (optional)', size: 40, 'aria-label': 'note' });
    const box = el('div', { class: 'actions' });
    const editArea = el('div', { class: 'edit', hidden: true });
    const resolve = async (decision, edit) => {
      for (const b of box.querySelectorAll('button')) b.disabled = true;
      try {
        const out = await api('POST', tenantPath('/approvals/' + seg(a.id) + '/resolve'),
          { decision, edit, reason: reason.value || undefined });
        const done = { approve: 'Approved', deny: 'Denied', edit: 'Edited' }[decision];
        status(done + ' ' + a.id + ': the resumed run\'s verdict is ' + out.verdict);
        card.className = 'approval resolved';
        box.remove();
        editArea.remove();
        result.replaceChildren(el('h4', { text: done + ': resumed outcome' }),
          dl([['Verdict', el('span', { class: 'verdict', text: out.verdict })], ['Binding', out.binding], ['Reason', out.reason]]),
          pre(out.context, 'context'));
      } catch (e) {
        status('Resolving ' + a.id + ' failed: ' + e.message, true);
        for (const b of box.querySelectorAll('button')) b.disabled = false;
      }
    };
    add(box, 
      el('button', { type: 'button', class: 'approve', text: 'Approve', onclick: () => resolve('approve') }),
      el('button', { type: 'button', class: 'deny', text: 'Deny', onclick: () => resolve('deny') }),
      (a.editable || []).length ? el('button', { type: 'button', class: 'edit-open', text: 'Edit…', onclick: () => { editArea.hidden = !editArea.hidden; } }) : null,
      reason);
    if ((a.editable || []).length) {
      const fields = {};
      for (const f of a.editable) if (a.proposed && f in a.proposed) fields[f] = a.proposed[f];
      const area = el('textarea', { rows: 8, 'aria-label': 'edited fields (JSON)' });
      area.value = json(fields);
      add(editArea, el('p', { text: 'Edit the fields (' + a.editable.join(', ') + ') as JSON, then approve with the edit.' }), area,
        el('div', { class: 'actions' }, el('button', { type: 'button', class: 'edit-submit', text: 'Approve with edit', onclick: () => {
          let edit;
          try { edit = JSON.parse(area.value); } catch (e) { status('The edit is not JSON: ' + e.message, true); return; }
          if (edit === null || typeof edit !== 'object' || Array.isArray(edit)) { status('The edit must be a JSON object', true); return; }
          resolve('edit', edit);
        } })));
    }
    return el('div', null, box, editArea);
  }

  // ---- runs ----

  async function runs(page, run) {
    const input = el('input', { type: 'text', id: 'run-id', size: 50, placeholder: 'run id', 'aria-label': 'run id' });
    input.value = run || '';
    const out = el('div', { id: 'run' });
    const form = el('form', { class: 'actions' }, input, el('button', { type: 'submit', text: 'Open run' }));
    form.addEventListener('submit', (ev) => { ev.preventDefault(); if (input.value.trim()) go('runs', input.value.trim()); });
    add(page, el('h2', { text: 'Runs' }), form, out);
    if (!run) return;
    location.hash = 'runs/' + seg(run);
    const doc = await api('GET', tenantPath('/runs/' + seg(run)));
    add(out, el('h3', { text: 'Run ' + doc.run }));
    doc.outcomes.forEach((o, i) => {
      add(out, el('h4', { text: i === 0 && doc.outcomes.length > 1 ? 'Outcome' : (i === 0 ? 'Outcome' : 'After resolution ' + i) }),
        dl([['Verdict', el('span', { class: 'verdict', text: o.verdict })], ['Binding', o.binding], ['By', o.by],
          ['Reason', o.reason], ['Message for the user', o.user_message], ['Configuration', o.config]]));
    });
    const last = doc.outcomes[doc.outcomes.length - 1];
    if (last && last.trace) {
      add(out, el('h4', { text: 'Trace' }), table(['Binding', 'Module', 'Phase', 'Hook decision', 'Applied', 'By', 'Failure', 'Resolution', 'Reason'],
        last.trace.map((s) => [s.binding, s.module, s.phase, s.decision ? s.decision.action : '', s.applied, s.by,
          s.failure ? s.failure.code + ': ' + s.failure.message : '', s.resolution ? s.resolution + (s.actor ? ' by ' + s.actor : '') : '',
          s.reason || (s.decision && s.decision.reason) || ''])));
    } else {
      add(out, el('p', { text: 'The run was posted without a run id, so its first outcome is not kept; its audit records follow.' }));
    }
    if (doc.approvals.length) {
      add(out, el('h4', { text: 'Approvals' }), table(['Approval', 'Binding', 'Status'],
        doc.approvals.map((a) => [a.id, a.binding, a.status])));
    }
    add(out, el('h4', { text: 'Audit records' }), auditTable(doc.audit));
  }

  function verification(v) {
    const cls = v.verified === 'verified' ? 'ok' : v.verified === 'unkeyed' ? 'warn' : 'bad';
    const text = { verified: 'verified (hash and MAC)', unkeyed: 'hash only (no MAC)', failed: 'FAILED' }[v.verified] || v.verified;
    return el('span', { class: 'verification ' + cls, title: v.problem || undefined, text: text + (v.problem ? ': ' + v.problem : '') });
  }

  function auditTable(items) {
    return table(['Seq', 'Time', 'Binding', 'Decision', 'By', 'Resolution', 'Reason', 'Credit', 'Verification', 'Linked'],
      items.map((it) => {
        const r = it.record;
        return [String(r.seq), r.time, r.binding, r.decision, r.by, r.resolution || '', r.reason || '', String(r.credit_charged || 0),
          verification(it), el('span', { class: it.linked === 'yes' ? 'ok' : it.linked === 'no' ? 'bad' : 'warn', text: it.linked })];
      }));
  }

  // ---- audit ----

  async function auditView(page, after) {
    const n = Number.parseInt(after, 10);
    const from = Number.isFinite(n) && n >= 0 ? n : -1;
    const doc = await api('GET', tenantPath('/audit?limit=100' + (from >= 0 ? '&after=' + from : '')));
    add(page, el('h2', { text: 'Audit' }),
      el('p', { text: 'The tenant\'s audit records, oldest first. Open a run to see its records verified.' }),
      table(['Seq', 'Time', 'Run', 'Point', 'Binding', 'Decision', 'By', 'Resolution', 'Reason'],
        doc.records.map((r) => [String(r.seq), r.time,
          el('button', { type: 'button', class: 'open-run', text: r.run, onclick: () => go('runs', r.run) }),
          r.point, r.binding, r.decision, r.by, r.resolution || '', r.reason || ''])));
    if (doc.records.length === 100) {
      const last = doc.records[doc.records.length - 1].seq;
      add(page, el('button', { type: 'button', text: 'Next page', onclick: () => go('audit', String(last)) }));
    }
  }

  // ---- hooks and versions ----

  function hookCard(h) {
    const v = h.version;
    return el('article', { class: 'hook', 'data-name': h.name },
      el('h3', null, h.name, ' — ', h.ref),
      h.problem ? el('p', { class: 'bad', text: h.problem }) : null,
      v ? dl([['Version', v.ref], ['Digest', v.digest], ['Manifest digest', v.manifest_digest],
        ['Signed', mark(h.signed, 'yes: a signature verifies', 'no valid signature')]]) : null,
      h.signatures.length ? table(['Signing key', 'Signature'], h.signatures.map((s) => [s.key_id, mark(s.valid, 'verifies', 'does not verify')])) : null,
      h.report ? el('details', null, el('summary', { text: 'Validation report' }), pre(h.report, 'report')) : null);
  }

  async function hooks(page) {
    const [doc, chain] = await Promise.all([api('GET', tenantPath('/hooks')),
      api('GET', tenantPath('/chain')).catch((e) => (e.status === 404 ? null : Promise.reject(e)))]);
    add(page, el('h2', { text: 'Hooks' }),
      el('p', { text: 'Signatures required at bind: ' + (doc.require_signatures ? 'yes' : 'no') }));
    if (doc.hooks.length === 0) add(page, el('p', { text: 'The tenant has bound nothing.' }));
    for (const h of doc.hooks) add(page, hookCard(h));
    if (chain && chain.config && Array.isArray(chain.config.bindings)) {
      add(page, el('h3', { text: 'Bindings' }), table(['Name', 'Module', 'Point', 'Phase', 'Priority'],
        chain.config.bindings.map((b) => [b.name, b.module, b.point, b.phase, b.priority === undefined ? '' : String(b.priority)])),
      el('details', null, el('summary', { text: 'Configuration' }), pre(chain.config)));
    }
  }

  async function versions(page) {
    const doc = await api('GET', '/v1/publishers/' + seg(me.tenant) + '/versions');
    add(page, el('h2', { text: 'Versions of ' + doc.publisher }));
    if (doc.versions.length === 0) add(page, el('p', { text: 'Nothing published yet.' }));
    for (const h of doc.versions) add(page, hookCard(h));
  }

  // ---- credit and usage ----

  function usageRow(u) {
    return [String(u.available), String(u.pending), String(u.granted), String(u.adjusted), String(u.charged), String(u.charges),
      String(u.runs), String(u.approvals_pending), String(u.approvals_resolved), String(u.audit_records)];
  }
  const USAGE_HEAD = ['Available', 'Pending', 'Granted', 'Adjusted', 'Charged', 'Charges', 'Runs (with id)', 'Approvals pending', 'Approvals resolved', 'Audit records'];

  async function usage(page) {
    const u = await api('GET', tenantPath('/usage'));
    add(page, el('h2', { text: 'Credit and usage of ' + u.tenant }), table(USAGE_HEAD, [usageRow(u)]));
  }

  async function tenants(page) {
    const doc = await api('GET', '/v1/tenants');
    // One tenant at a time: the key's rate limit is shared with every
    // other use of it.
    const rows = [];
    for (const t of doc.tenants) {
      const u = await api('GET', '/v1/tenants/' + seg(t.id) + '/usage');
      rows.push([t.id, t.require_signatures ? 'yes' : 'no', ...usageRow(u)]);
    }
    add(page, el('h2', { text: 'Tenants' }), table(['Tenant', 'Signatures required', ...USAGE_HEAD], rows));
  }

  const RENDER = { approvals, runs, audit: auditView, hooks, versions, usage, tenants };

  document.addEventListener('DOMContentLoaded', () => {
    $('signout').addEventListener('click', () => signOut());
    if (sessionStorage.getItem(KEY)) start(); else showSignIn();
  });
})();
