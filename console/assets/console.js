// The Ferry console: one page over the runtime's management API.
//
// Every value from the runtime is put into the page as text (el() appends
// strings as text nodes; nothing here sets innerHTML), so a payload, an
// error or a name cannot become markup. The session cookie authenticates
// each request; the page never sees a key.
'use strict';

(function () {
  // ---- small helpers -------------------------------------------------

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k === 'class') e.className = v;
      else if (k === 'value') e.value = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === undefined || kid === null || kid === false) continue;
      e.append(kid instanceof Node ? kid : String(kid));
    }
    return e;
  }

  class APIError extends Error {
    constructor(status, code, reason) {
      super(reason || ('HTTP ' + status));
      this.status = status;
      this.code = code;
    }
  }

  let sessionOver = false;

  // The page key: the login's redirect brings it in the fragment (which
  // no server sees); it moves into this origin's storage at once, and
  // every API request carries it next to the session cookie. The cookie
  // reaches every port of this host; the key stays with this origin.
  const keyName = 'ferry-console-key';
  const fromLogin = location.hash.match(/^#key=([A-Za-z0-9_-]+)$/);
  if (fromLogin) {
    localStorage.setItem(keyName, fromLogin[1]);
    history.replaceState(null, '', location.pathname + '#/connectors');
  }
  const pageKey = localStorage.getItem(keyName) || '';

  async function api(method, path, body) {
    const init = { method, credentials: 'same-origin', headers: { 'X-Ferry-Console': pageKey } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    if (res.status === 401) {
      sessionOver = true;
      flash('This browser is no longer logged in (the session ended, or the runtime restarted). Run `ferry ui` for a new link.', true);
      throw new APIError(401, 'unauthorized', 'not logged in');
    }
    const text = await res.text();
    let data = null;
    if (text !== '') {
      try { data = JSON.parse(text); } catch (_) { data = text; }
    }
    if (!res.ok) {
      const reason = data && data.reason ? data.reason : (typeof data === 'string' ? data : res.statusText);
      throw new APIError(res.status, data && data.code, reason);
    }
    return data;
  }

  function flash(text, isError) {
    const box = document.getElementById('flash');
    box.replaceChildren(el('p', { class: isError ? 'msg error' : 'msg' }, text));
    if (!isError) setTimeout(() => { if (box.textContent === text) box.replaceChildren(); }, 6000);
  }

  // act runs an action from a button, reports its result or error, and
  // refreshes the view.
  async function act(button, what, fn) {
    if (button) button.disabled = true;
    try {
      const msg = await fn();
      flash(msg || (what + ': done'));
    } catch (e) {
      flash(what + ': ' + e.message, true);
    } finally {
      if (button) button.disabled = false;
      refreshNow();
    }
  }

  function status(s) {
    return el('span', { class: 'status-' + String(s || '').toLowerCase() }, s || '—');
  }
  function num(n) { return n === undefined || n === null ? '—' : Number(n).toLocaleString('en-US'); }
  function short(s, n) {
    s = String(s === undefined || s === null ? '' : s);
    return s.length > n ? s.slice(0, n) + '…' : s;
  }
  function time(t) {
    if (!t) return '—';
    const d = new Date(t);
    return isNaN(d) ? String(t) : d.toLocaleString();
  }
  function path(kind, key, rest) { return '/' + kind + 's/' + encodeURIComponent(key) + (rest || ''); }
  function table(head, rows, empty) {
    if (rows.length === 0) return el('p', { class: 'muted' }, empty);
    return el('table', {},
      el('thead', {}, el('tr', {}, head.map(h => el('th', { class: h.endsWith('#') ? 'num' : null }, h.replace(/#$/, ''))))),
      el('tbody', {}, rows));
  }

  async function allConnectors() {
    const [sources, sinks] = await Promise.all([api('GET', '/sources'), api('GET', '/sinks')]);
    return sources.map(c => Object.assign({ kind: 'source' }, c)).concat(sinks.map(c => Object.assign({ kind: 'sink' }, c)));
  }

  // connectorPicker is a select of every connector; choosing one goes to
  // #/<view>/<kind>/<key>.
  function connectorPicker(list, view, kind, key) {
    const sel = el('select', {
      'aria-label': 'connector',
      onchange: () => { location.hash = '#/' + view + '/' + sel.value; },
    }, el('option', { value: '' }, 'choose a connector…'),
    list.map(c => el('option', { value: c.kind + '/' + encodeURIComponent(c.key), selected: c.kind === kind && c.key === key },
      c.kind + ' ' + c.key)));
    return el('label', {}, 'Connector', sel);
  }

  // ---- views ---------------------------------------------------------
  // Each view's mount(root, args) builds what stays (forms) and returns
  // refresh(), which redraws what changes; it runs on a timer.

  const rates = {}; // connector → last counter reading, for messages/s

  const views = {};

  views.connectors = function (root) {
    const body = el('div');
    root.append(el('h2', {}, 'Connectors'), body);
    return async function refresh() {
      const [stats, list] = await Promise.all([api('GET', '/stats'), allConnectors()]);
      const info = {};
      for (const c of list) info[c.kind + '/' + c.key] = c;
      const now = Date.now();
      const rows = (stats.connectors || []).map(c => {
        const id = c.connector_type + '/' + c.key;
        const n = c.connector_type === 'source' ? (c.messages_sent || 0) : (c.messages_processed || 0);
        const prev = rates[id];
        const rate = prev && now > prev.at ? Math.max(0, (n - prev.n) * 1000 / (now - prev.at)) : null;
        rates[id] = { at: now, n };
        const last = info[id] && info[id].last_error ? info[id].last_error.message : '';
        return el('tr', { 'data-key': c.key },
          el('td', {}, c.connector_type),
          el('td', { class: 'mono' }, c.key),
          el('td', {}, status(c.status)),
          el('td', { class: 'num' }, rate === null ? '—' : rate.toFixed(1)),
          el('td', { class: 'num' }, num(n)),
          el('td', { class: 'num' }, c.connector_type === 'sink' ? num(c.lag_total) : ''),
          el('td', { class: 'num' }, num(c.errors)),
          el('td', { class: 'num' }, num(c.messages_dead_lettered)),
          el('td', { class: 'error' }, short(last, 160)),
          el('td', {},
            el('button', { type: 'button', 'data-action': 'restart', onclick: e => act(e.target, 'restart ' + c.key, async () => {
              await api('POST', path(c.connector_type, c.key, '/restart'));
              return c.key + ' restarted';
            }) }, 'Restart'), ' ',
            el('a', { href: '#/dead-letters/' + c.connector_type + '/' + encodeURIComponent(c.key) }, 'dead letters'), ' ',
            el('a', { href: '#/configs/' + c.connector_type + '/' + encodeURIComponent(c.key) }, 'configs')));
      });
      body.replaceChildren(table(['Kind', 'Key', 'Status', 'Msg/s#', 'Messages#', 'Lag#', 'Errors#', 'Dead-lettered#', 'Last error', ''],
        rows, 'No connectors: add them to the configuration, or create a hook.'));
    };
  };

  views['dead-letters'] = function (root, kind, key) {
    const picker = el('div', { class: 'toolbar' });
    const body = el('div');
    root.append(el('h2', {}, 'Dead letters'), picker, body);
    allConnectors().then(list => picker.replaceChildren(connectorPicker(list, 'dead-letters', kind, key)))
      .catch(e => flash(e.message, true));
    if (!key) {
      body.append(el('p', { class: 'muted' }, 'Choose a connector to see the messages it dead-lettered and why, and to replay them.'));
      return null;
    }
    return async function refresh() {
      const dl = await api('GET', path(kind, key, '/dead_letters'));
      const parts = [];
      if (dl.note) parts.push(el('p', { class: 'muted' }, dl.note));
      for (const t of dl.topics || []) {
        const to = el('input', { placeholder: 'STREAM/TOPIC (default: where each came from)', class: 'wide', 'aria-label': 'replay to' });
        const replay = (button, one) => act(button, 'replay', async () => {
          const req = { stream: t.stream, topic: t.topic };
          if (to.value.trim() !== '') req.to = to.value.trim();
          if (one) { req.partition = one.partition; req.offset = one.offset; }
          const r = await api('POST', path(kind, key, '/dead_letters/replay'), req);
          const dests = Object.entries(r.to || {}).map(([d, n]) => n + ' to ' + d).join(', ');
          return r.replayed === 0 ? 'nothing to replay' : 'replayed ' + r.replayed + ' message(s): ' + dests;
        });
        const rows = (t.letters || []).map(d => el('tr', { 'data-offset': d.offset },
          el('td', { class: 'num' }, d.partition),
          el('td', { class: 'num' }, d.offset),
          el('td', {}, time(d.dead_lettered_at)),
          el('td', { class: 'error' }, short(d.error, 300)),
          el('td', { class: 'mono' }, from(d)),
          el('td', { class: 'mono payload' }, d.payload_hex ? '0x' + short(d.payload_hex, 200) : short(d.payload, 300)),
          el('td', {}, el('button', { type: 'button', 'data-action': 'replay', onclick: e => replay(e.target, d) }, 'Replay'))));
        parts.push(el('section', { class: 'card', 'data-topic': t.stream + '/' + t.topic },
          el('h3', { class: 'mono' }, t.stream + '/' + t.topic),
          el('p', { class: 'muted' }, num(t.messages) + ' dead-lettered, ' + num(t.replayed) + ' replayed so far' +
            (t.exists === false ? ' (the topic does not exist yet)' : '')),
          el('div', { class: 'toolbar' }, el('label', {}, 'Replay to', to),
            el('button', { type: 'button', class: 'primary', 'data-action': 'replay-all', onclick: e => replay(e.target, null) }, 'Replay all not yet replayed')),
          table(['Partition#', 'Offset#', 'When', 'Reason', 'From', 'Payload', ''], rows, 'No dead letters.')));
      }
      if (parts.length === 0) parts.push(el('p', { class: 'muted' }, 'This connector writes no dead letters.'));
      body.replaceChildren(...parts);
    };
  };

  function from(d) {
    let s = (d.stream || '?') + '/' + (d.topic || '?');
    if (d.original_partition !== undefined && d.original_offset !== undefined) s += ' p' + d.original_partition + ' @' + d.original_offset;
    else if (d.source_index !== undefined) s += ' (source batch #' + d.source_index + ')';
    return s;
  }

  const hookPrefix = 'hook-';
  let shownLogs = '';

  views.hooks = function (root) {
    const name = el('input', { name: 'name', required: true, placeholder: 'my-first-hook', pattern: '[A-Za-z0-9][A-Za-z0-9._-]*' });
    const topic = el('input', { name: 'topic', required: true, placeholder: 'my-topic' });
    const stream = el('input', { name: 'stream', required: true, value: 'hooks' });
    const command = el('input', { name: 'command', required: true, class: 'wide', placeholder: 'php artisan execute:command {payload}' });
    const form = el('form', { class: 'inline', onsubmit: e => {
      e.preventDefault();
      act(form.querySelector('button'), 'create hook ' + name.value, async () => {
        await createHook(name.value.trim(), stream.value.trim(), topic.value.trim(), command.value);
        const made = name.value.trim();
        name.value = ''; topic.value = ''; command.value = '';
        return 'hook ' + made + ' created';
      });
    } }, el('label', {}, 'Name', name), el('label', {}, 'Stream', stream), el('label', {}, 'Topic', topic),
    el('label', {}, 'Command (run with sh -c for each message)', command), el('button', { type: 'submit', class: 'primary' }, 'Create hook'));
    const list = el('div');
    const logs = el('div', { id: 'runs' });
    root.append(el('h2', {}, 'Hooks'),
      el('p', { class: 'muted' }, 'A hook runs a command for each message of a topic: {payload}, {id}, {offset}, {partition}, {stream}, {topic} and {timestamp} become quoted environment variables, never shell text.'),
      form, list, logs);
    return async function refresh() {
      const [sinks, stats] = await Promise.all([api('GET', '/sinks'), api('GET', '/stats')]);
      const counters = {};
      for (const c of stats.connectors || []) if (c.connector_type === 'sink') counters[c.key] = c;
      const hooks = sinks.filter(s => s.key.startsWith(hookPrefix) && (s.path === 'exec' || s.path === 'http'));
      const configs = await Promise.all(hooks.map(h => api('GET', path('sink', h.key, '/configs/active')).catch(() => null)));
      const rows = hooks.map((h, i) => {
        const c = configs[i] || {};
        const st = (c.streams || [])[0] || {};
        const pc = c.plugin_config || {};
        const n = counters[h.key] || {};
        const hookName = h.key.slice(hookPrefix.length);
        return el('tr', { 'data-hook': hookName },
          el('td', { class: 'mono' }, hookName),
          el('td', {}, status(h.status)),
          el('td', { class: 'mono' }, (st.stream || '?') + '/' + (st.topics || []).join(',')),
          el('td', { class: 'mono' }, short(pc.command || pc.url || '', 120)),
          el('td', { class: 'num', 'data-count': 'consumed' }, num(n.messages_consumed)),
          el('td', { class: 'num', 'data-count': 'processed' }, num(n.messages_processed)),
          el('td', { class: 'num', 'data-count': 'dead_lettered' }, num(n.messages_dead_lettered)),
          el('td', { class: 'error' }, short(h.last_error ? h.last_error.message : '', 160)),
          el('td', {},
            el('button', { type: 'button', 'data-action': 'logs', onclick: () => { shownLogs = hookName; refreshNow(); } }, 'Logs'), ' ',
            el('a', { href: '#/dead-letters/sink/' + encodeURIComponent(h.key), 'data-action': 'dead-letters' }, 'dead letters'), ' ',
            el('button', { type: 'button', class: 'danger', 'data-action': 'delete', onclick: e => {
              if (!confirm('Delete hook ' + hookName + '? It stops, and its configuration versions are deleted.')) return;
              act(e.target, 'delete hook ' + hookName, async () => {
                await api('DELETE', path('sink', h.key));
                if (shownLogs === hookName) shownLogs = '';
                return 'hook ' + hookName + ' deleted';
              });
            } }, 'Delete')));
      });
      list.replaceChildren(table(['Name', 'Status', 'Topic', 'Command', 'Consumed#', 'Processed#', 'Dead-lettered#', 'Last error', ''],
        rows, 'No hooks yet.'));
      if (!shownLogs || !hooks.some(h => h.key === hookPrefix + shownLogs)) { logs.replaceChildren(); return; }
      let runs = [];
      try {
        runs = (await api('GET', path('sink', hookPrefix + shownLogs, '/activity'))).activity || [];
      } catch (e) {
        logs.replaceChildren(el('h3', {}, 'Runs of ' + shownLogs), el('p', { class: 'muted' }, e.message));
        return;
      }
      logs.replaceChildren(el('h3', {}, 'Recent runs of ' + shownLogs),
        table(['Started', 'Partition#', 'Offset#', 'Exit#', 'Duration', 'Output'], runs.slice().reverse().map(r => el('tr', {},
          el('td', {}, time(r.started)),
          el('td', { class: 'num' }, r.partition),
          el('td', { class: 'num' }, r.offset),
          el('td', { class: 'num' + (r.exit_code === 0 ? '' : ' error') }, r.exit_code),
          el('td', {}, (r.duration_us / 1000).toFixed(1) + ' ms'),
          el('td', { class: 'mono payload' }, short(r.error || r.stdout || r.stderr || '', 300)))), 'No runs since the hook started.'));
    };
  };

  // createHook stores a hook as `ferry hook create NAME TOPIC COMMAND
  // --stream STREAM` does (cmd/ferry/hook.go): an exec sink "hook-NAME"
  // reading one message at a time with its own consumer group, failures
  // dead-lettered after the default retries; then activates and starts it,
  // and deletes it again when it does not start.
  async function createHook(name, stream, topic, command) {
    const key = hookPrefix + name;
    try {
      await api('GET', path('sink', key, '/configs'));
      throw new Error('a hook ' + name + ' exists already');
    } catch (e) {
      if (e.status !== 404) throw e;
    }
    const saved = await api('POST', path('sink', key, '/configs'), {
      enabled: true, name: name, path: 'exec', plugin_config: { command: command },
      streams: [{ stream: stream, topics: [topic], schema: 'raw', batch_length: 1, poll_interval: '100ms',
        consumer_group: key, on_error: 'dead_letter' }],
    });
    try {
      await api('PUT', path('sink', key, '/configs/active'), { version: saved.version });
      await api('POST', path('sink', key, '/restart'));
    } catch (e) {
      await api('DELETE', path('sink', key)).catch(() => {});
      throw e;
    }
  }

  views.configs = function (root, kind, key) {
    const picker = el('div', { class: 'toolbar' });
    const body = el('div');
    const editor = el('textarea', { spellcheck: 'false', 'aria-label': 'configuration' });
    const editorBox = el('section', { class: 'card', hidden: true },
      el('h3', {}, 'New version'),
      el('p', { class: 'muted' }, 'Edit the JSON and save it as a new version; activate it and restart the connector to run it. Secrets show as redacted and are kept from the version it came from.'),
      editor,
      el('div', { class: 'toolbar' }, el('button', { type: 'button', class: 'primary', 'data-action': 'save', onclick: e => act(e.target, 'save version', async () => {
        let cfg;
        try { cfg = JSON.parse(editor.value); } catch (err) { throw new Error('the configuration is not valid JSON: ' + err.message); }
        const saved = await api('POST', path(kind, key, '/configs'), cfg);
        editorBox.hidden = true;
        return 'version ' + saved.version + ' saved; activate it to run it';
      }) }, 'Save as new version'),
      el('button', { type: 'button', onclick: () => { editorBox.hidden = true; } }, 'Cancel')));
    root.append(el('h2', {}, 'Configuration versions'), picker, body, editorBox);
    allConnectors().then(list => picker.replaceChildren(connectorPicker(list, 'configs', kind, key)))
      .catch(e => flash(e.message, true));
    if (!key) {
      body.append(el('p', { class: 'muted' }, 'Choose a connector to see its configuration versions, edit one into a new version, and activate it.'));
      return null;
    }
    let shown = null;
    return async function refresh() {
      const versions = await api('GET', path(kind, key, '/configs'));
      const rows = versions.slice().reverse().map(v => el('tr', { 'data-version': v.version },
        el('td', { class: 'num' }, v.version),
        el('td', { 'data-state': '' }, v.active ? 'active' : '', v.running ? ' running' : '', v.restart_required ? ' (restart to run it)' : ''),
        el('td', {},
          el('button', { type: 'button', 'data-action': 'view', onclick: () => { shown = v.version; refreshNow(); } }, 'View'), ' ',
          el('button', { type: 'button', 'data-action': 'edit', onclick: () => {
            const copy = Object.assign({}, v);
            for (const k of ['version', 'created_at', 'active', 'running', 'restart_required', 'key']) delete copy[k];
            editor.value = JSON.stringify(copy, null, 2);
            editorBox.hidden = false;
            editor.focus();
          } }, 'Edit as new version'), ' ',
          v.active ? null : el('button', { type: 'button', 'data-action': 'activate', onclick: e => act(e.target, 'activate version ' + v.version, async () => {
            await api('PUT', path(kind, key, '/configs/active'), { version: v.version });
            return 'version ' + v.version + ' is active; restart the connector to run it';
          }) }, 'Activate'), ' ',
          v.active && !v.running ? el('button', { type: 'button', class: 'primary', 'data-action': 'restart', onclick: e => act(e.target, 'restart ' + key, async () => {
            await api('POST', path(kind, key, '/restart'));
            return key + ' restarted on version ' + v.version;
          }) }, 'Restart to run it') : null,
          v.active || v.running ? null : el('button', { type: 'button', class: 'danger', 'data-action': 'delete', onclick: e => act(e.target, 'delete version ' + v.version, async () => {
            await api('DELETE', path(kind, key, '/configs?version=' + v.version));
            return 'version ' + v.version + ' deleted';
          }) }, 'Delete'))));
      const parts = [table(['Version#', 'State', ''], rows, 'No stored versions.')];
      const v = versions.find(x => x.version === shown);
      if (v) parts.push(el('h3', {}, 'Version ' + v.version), el('pre', {}, JSON.stringify(v, null, 2)));
      body.replaceChildren(...parts);
    };
  };

  views.streams = function (root) {
    const body = el('div');
    root.append(el('h2', {}, 'Streams and topics'), body);
    return async function refresh() {
      const streams = await api('GET', '/streams');
      const parts = (streams || []).map(s => el('section', { class: 'card', 'data-stream': s.name },
        el('h3', { class: 'mono' }, s.name, el('span', { class: 'muted' }, '  #' + s.id)),
        table(['Topic', 'Partitions#', 'Messages#', 'Size#', 'Created'], (s.topics || []).map(t => el('tr', { 'data-topic': t.name },
          el('td', { class: 'mono' }, t.name),
          el('td', { class: 'num' }, num(t.partitions)),
          el('td', { class: 'num' }, num(t.messages_count)),
          el('td', { class: 'num' }, bytes(t.size_bytes)),
          el('td', {}, time(t.created_at)))), 'No topics.')));
      body.replaceChildren(...(parts.length ? parts : [el('p', { class: 'muted' }, 'No streams.')]));
    };
  };

  function bytes(n) {
    if (n === undefined || n === null) return '—';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(1)) + ' ' + u[i];
  }

  // ---- routing and polling -------------------------------------------

  let current = null; // {refresh, timer}

  function refreshNow() {
    if (!current || !current.refresh || sessionOver) return;
    const c = current;
    c.refresh().then(() => {
      if (c === current) document.body.dataset.loaded = String(Date.now()); // tests wait on it
    }).catch(e => { if (c === current && e.status !== 401) flash(e.message, true); });
  }

  function route() {
    const [name, kind, key] = location.hash.replace(/^#\/?/, '').split('/');
    const view = views[name] ? name : 'connectors';
    if (current && current.timer) clearInterval(current.timer);
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('current', a.dataset.view === view);
    const root = document.getElementById('view');
    root.replaceChildren();
    const refresh = views[view](root, kind, key ? decodeURIComponent(key) : undefined);
    current = { refresh, timer: refresh ? setInterval(refreshNow, 2000) : null };
    refreshNow();
  }

  async function header() {
    try {
      const st = await api('GET', '/stats');
      document.getElementById('runtime').textContent = 'runtime ' + st.connectors_runtime_version + ' · Iggy ' +
        st.iggy_address + (st.iggy_embedded ? ' (embedded)' : '');
    } catch (_) { /* flashed */ }
  }

  document.getElementById('logout').addEventListener('click', async () => {
    localStorage.removeItem(keyName);
    await fetch('/ui/logout', { method: 'POST', credentials: 'same-origin' });
    location.href = '/ui/';
  });
  window.addEventListener('hashchange', route);
  header();
  route();
})();
