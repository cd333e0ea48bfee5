// toolbrake dashboard: keeps the server-rendered pages live. Polls the JSON API and writes
// only text into the page (never HTML), so nothing the store holds can run as markup.
'use strict'

const page = document.body.dataset.page
const status = document.getElementById('status')

function say(text, ok) {
  if (!status) return
  status.textContent = text
  status.className = ok ? 'ok' : 'error'
}

async function api(method, path, body, headers = {}) {
  const init = { method, headers: { ...headers } }
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json'
    init.body = JSON.stringify(body)
  }
  const r = await fetch(path, init)
  const data = await r.json().catch(() => ({}))
  if (!r.ok) throw Object.assign(new Error(data?.error?.message ?? `HTTP ${r.status}`), { data, status: r.status })
  return data
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v
    else if (k === 'style') e.setAttribute('style', v)
    else if (k.startsWith('data-')) e.setAttribute(k, v)
    else e[k] = v
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c ?? '')))
  return e
}

function bar(count, limit) {
  const pct = limit ? Math.min(100, Math.floor((count * 100) / limit)) : 0
  return el('span', {}, el('span', { class: 'bar' }, el('span', { style: `width:${pct}%` })), `${count}/${limit}`)
}

function segment(s) {
  return encodeURIComponent(s)
}

function nearestGate(s) {
  const n = (s.near ?? [])[0]
  return n ? el('span', {}, bar(n.count, n.limit), ' ', n.doing, el('div', {}, el('code', { class: 'muted' }, n.fingerprint))) : el('span', { class: 'muted' }, 'none near')
}

function workingRow(s) {
  return el(
    'tr',
    s.gated ? { class: 'gated' } : {},
    el('td', {}, el('a', { href: `/sessions/${segment(s.key)}` }, el('code', {}, s.key))),
    el('td', { class: 'muted' }, s.ago),
    el('td', {}, nearestGate(s)),
    el('td', {}, s.stopped),
  )
}

async function refreshHome() {
  const o = await api('GET', '/api/overview')
  const store = document.getElementById('store')
  if (store) store.textContent = o.store
  const summary = document.getElementById('summary')
  if (summary && summary.textContent !== o.summary) summary.textContent = o.summary
  const body = document.querySelector('#working tbody')
  const rows = o.working.length ? o.working.map(workingRow) : [el('tr', {}, el('td', { colSpan: 4, class: 'muted' }, 'No session made a call in the last 15 minutes.'))]
  body.replaceChildren(...rows)
}

async function refreshSession() {
  const key = document.getElementById('key')?.dataset.key
  if (!key) return
  const s = await api('GET', `/api/sessions/${segment(key)}`)
  const body = document.querySelector('#timeline tbody')
  const log = [...(s.log ?? [])].reverse()
  const rows = log.map((e) =>
    el(
      'tr',
      {},
      el('td', {}, el('span', { class: `verdict v-${e.verdict}` }, e.verdict), e.code ? el('div', { class: 'muted' }, e.code) : '', e.answer ? el('div', { class: 'muted' }, `asked, ${e.answer}`) : ''),
      el('td', {}, e.tool),
      el('td', {}, el('code', {}, e.preview)),
      el('td', {}, e.near ? el('span', {}, bar(e.near[1], e.near[2]), ' ', el('code', {}, e.near[0])) : ''),
      el('td', {}, e.outcome ?? '—', e.returned ? el('div', { class: 'muted' }, e.returned === 'same' ? 'same as last time (waste)' : 'new information') : ''),
    ),
  )
  body.replaceChildren(...(rows.length ? rows : [el('tr', {}, el('td', { colSpan: 5, class: 'muted' }, 'No decisions recorded.'))]))
}

// Asks before changing anything, in the page's own dialog (keyboard-usable: it takes the
// focus, Escape cancels, Enter on the focused button answers).
function confirmWith(title, text, yes) {
  const dialog = document.getElementById('confirm')
  document.getElementById('confirm-title').textContent = title
  document.getElementById('confirm-text').textContent = text
  document.getElementById('confirm-yes').textContent = yes
  dialog.returnValue = ''
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'yes'), { once: true })
    dialog.showModal()
  })
}

const FEEDBACK = {
  mistaken: {
    title: "It wasn't stuck?",
    text: 'Calibration will count this run as a good one: its stops as mistaken.',
    yes: "Yes, it wasn't stuck",
    done: "You said it wasn't stuck: its stops count as mistaken when toolbrake is calibrated.",
  },
  stuck: {
    title: 'It was stuck?',
    text: 'Calibration will never count this run as a good one, stopped or not.',
    yes: 'Yes, it was stuck',
    done: 'You said it was stuck: it never counts as a good run when toolbrake is calibrated.',
  },
}

document.addEventListener('click', async (ev) => {
  const target = ev.target instanceof Element ? ev.target.closest('button') : null
  if (!target) return
  const reset = target.dataset.reset
  const feedback = target.dataset.feedback
  if (reset !== undefined) {
    if (!(await confirmWith('Reset this session?', `Session ${reset}: its counts, exemptions and refusals are forgotten.`, 'Reset'))) return
    try {
      await api('DELETE', `/api/sessions/${segment(reset)}`)
      say(`Session ${reset} was reset.`, true)
    } catch (e) {
      say(e.message, false)
    }
  } else if (feedback !== undefined && FEEDBACK[feedback]) {
    const f = FEEDBACK[feedback]
    const key = target.dataset.key
    if (!(await confirmWith(f.title, `Session ${key}. ${f.text}`, f.yes))) return
    try {
      await api('POST', `/api/sessions/${segment(key)}/feedback`, { feedback })
      const shown = document.getElementById('feedback')
      shown.textContent = f.done
      shown.dataset.feedback = feedback
      say('Saved.', true)
    } catch (e) {
      say(e.message, false)
    }
  }
})

const form = document.getElementById('settings')
if (form) {
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault()
    const edit = {}
    for (const input of form.querySelectorAll('[data-kind]')) {
      const kind = input.dataset.kind
      let value
      if (kind === 'bool') value = input.checked
      else if (kind === 'int') value = input.value.trim() === '' ? null : Number(input.value.trim())
      else if (kind === 'stage') value = /^-?\d+$/.test(input.value.trim()) ? Number(input.value.trim()) : input.value.trim()
      else value = input.value
      if (String(value) === input.dataset.initial) continue
      const [section, sub] = input.name.split('.').length === 3 ? [input.name.split('.')[0], input.name.split('.')[1]] : [input.name.split('.')[0], null]
      const key = input.name.split('.').pop()
      edit[section] ??= {}
      if (sub) (edit[section][sub] ??= {})[key] = value
      else edit[section][key] = value
    }
    if (Object.keys(edit).length === 0) return say('Nothing changed.', true)
    try {
      // The version this form was filled from: an edit saved meanwhile is not overwritten.
      const saved = await api('PUT', '/api/config', edit, { 'if-match': form.dataset.version })
      form.dataset.version = saved.version
      say('Saved. The next decision uses it.', true)
      for (const input of form.querySelectorAll('[data-kind]')) {
        input.dataset.initial = input.dataset.kind === 'bool' ? String(input.checked) : input.value
      }
    } catch (e) {
      const d = e.data?.error
      if (e.status === 409) say('Not saved: the settings were changed elsewhere since this page was loaded. Reload the page to see them, then make your change again.', false)
      else say(d?.key ? `Not saved: ${d.key} = ${d.value}: it ${d.rule}.` : `Not saved: ${e.message}`, false)
    }
  })
}

// The tune recommendation, applied as an edit of the settings (confirmed first; the
// version the page was filled from, so an edit saved meanwhile is not overwritten).
const apply = document.getElementById('apply-tune')
if (apply && form) {
  apply.addEventListener('click', async () => {
    const edit = JSON.parse(apply.dataset.edit)
    if (!(await confirmWith('Use the recommendation?', 'The settings it changes are written to the configuration file, checked as every edit is.', 'Use it'))) return
    try {
      await api('PUT', '/api/config', edit, { 'if-match': form.dataset.version })
      say('Saved: the recommendation is in the configuration. Reloading…', true)
      location.reload()
    } catch (e) {
      if (e.status === 409) say('Not saved: the settings were changed elsewhere since this page was loaded. Reload the page and try again.', false)
      else say(`Not saved: ${e.message}`, false)
    }
  })
}

async function tick() {
  try {
    if (page === 'home') await refreshHome()
    if (page === 'session') await refreshSession()
  } catch (e) {
    say(`Live updates paused: ${e.message}`, false)
  }
}
if (page === 'home' || page === 'session') setInterval(tick, 2000)
