/* report.js - draws the heaptrail HTML report from the JSON document embedded in the page */
'use strict';

(function () {
	/* ---- errors are shown on the page, not only in the console ---------- */
	const errbox = document.getElementById('errors');

	function showError(msg) {
		errbox.style.display = 'block';
		errbox.textContent += (errbox.textContent ? '\n' : '') + 'report error: ' + msg;
	}
	window.addEventListener('error', function (e) {
		showError(e.message + (e.lineno ? ' (line ' + e.lineno + ')' : ''));
	});

	const SVGNS = 'http://www.w3.org/2000/svg';
	let D;

	/* ---- small helpers ------------------------------------------------- */

	function el(tag, attrs, kids) {
		const e = document.createElement(tag);
		setAttrs(e, attrs);
		addKids(e, kids);
		return e;
	}

	function sv(tag, attrs, kids) {
		const e = document.createElementNS(SVGNS, tag);
		setAttrs(e, attrs);
		addKids(e, kids);
		return e;
	}

	function setAttrs(e, attrs) {
		if (!attrs)
			return;
		for (const k in attrs) {
			const v = attrs[k];
			if (v === undefined || v === null || v === false)
				continue;
			if (k === 'text')
				e.textContent = v;
			else if (k === 'cls')
				e.setAttribute('class', v);
			else if (k.startsWith('on'))
				e.addEventListener(k.slice(2), v);
			else
				e.setAttribute(k, v === true ? '' : v);
		}
	}

	function addKids(e, kids) {
		if (kids === undefined || kids === null)
			return;
		if (!Array.isArray(kids))
			kids = [kids];
		for (const k of kids) {
			if (k === undefined || k === null || k === false)
				continue;
			e.appendChild(typeof k === 'string' || typeof k === 'number' ?
				document.createTextNode(String(k)) : k);
		}
	}

	/* As cli_bytes(): "512 B", "1.2 KiB", "45.3 MiB". */
	function fmtBytes(b) {
		if (b === null || b === undefined)
			return '-';
		const neg = b < 0;
		let v = Math.abs(b);
		const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
		let u = 0;
		while (v >= 1024 && u < units.length - 1) {
			v /= 1024;
			u++;
		}
		const s = u === 0 ? String(Math.round(v)) : v.toFixed(1);
		return (neg ? '-' : '') + s + ' ' + units[u];
	}

	function fmtCount(n) {
		if (n === null || n === undefined)
			return '-';
		return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
	}

	function fmtSec(t) {
		if (t === null || t === undefined)
			return '-';
		if (t === 0)
			return '0 s';
		if (t >= 100)
			return t.toFixed(1) + ' s';
		if (t >= 1)
			return t.toFixed(3) + ' s';
		if (t >= 0.001)
			return (t * 1e3).toFixed(2) + ' ms';
		return (t * 1e6).toFixed(1) + ' \u00b5s';
	}

	function fmtRate(bps) {
		return (bps < 0 ? '-' : '+') + fmtBytes(Math.abs(bps)) + '/s';
	}

	function pct(a, b) {
		if (!b)
			return '-';
		const p = a * 100 / b;
		return (p >= 10 || p === 0 ? p.toFixed(0) : p.toFixed(1)) + '%';
	}

	function baseName(p) {
		if (!p)
			return p;
		const i = p.lastIndexOf('/');
		return i < 0 ? p : p.slice(i + 1);
	}

	const RUNTIME = /^(libc\.so|libc-|libstdc\+\+\.so|libgcc_s|ld-linux|libm\.so|libpthread|libdl\.so|linux-vdso)/;

	function isRuntime(module) {
		return !!module && RUNTIME.test(baseName(module));
	}

	/* Nice axis steps: 1, 2, 5 times a power of ten (of 1024 for bytes). */
	function niceStep(span, ticks, binary) {
		if (!(span > 0))
			return 1;
		let unit = 1;
		if (binary) {
			while (span / unit >= 1024 * 2)
				unit *= 1024;
		}
		const raw = span / unit / ticks;
		const p = Math.pow(10, Math.floor(Math.log10(raw)));
		const f = raw / p;
		const m = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
		return m * p * unit;
	}

	function hashStr(s) {
		let h = 2166136261;
		for (let i = 0; i < s.length; i++) {
			h ^= s.charCodeAt(i);
			h = Math.imul(h, 16777619);
		}
		return h >>> 0;
	}

	const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f',
		'#c9a227', '#b07aa1', '#ff9da7', '#9c755f', '#8cd17d'];

	/* ---- sites ----------------------------------------------------------- */

	let SITES;

	function site(id) {
		return SITES.get(id);
	}

	function frame(i) {
		const f = D.frames[i];
		return { name: f[0], file: f[1], line: f[2], module: f[3], inlined: !!f[4] };
	}

	function siteName(id) {
		const s = site(id);
		if (!s)
			return 'site #' + id;
		return s.function || s.label || ('site #' + id);
	}

	function siteWhere(s) {
		if (!s)
			return '';
		if (s.file)
			return baseName(s.file) + (s.line ? ':' + s.line : '');
		return s.module ? baseName(s.module) : '';
	}

	function siteCell(id) {
		const s = site(id);
		const td = el('td', { cls: 'site' });
		td.appendChild(el('span', { cls: 'mono', text: siteName(id) }));
		const w = siteWhere(s);
		if (w)
			td.appendChild(el('span', { cls: 'loc', text: '  ' + w }));
		return td;
	}

	/* The stack of a site, its top frame first, then each caller. */
	function stackList(id) {
		const s = site(id);
		const ol = el('ol', { cls: 'stack' });
		if (!s || !s.stack.length) {
			ol.appendChild(el('li', { text: '(no stack recorded)' }));
			return ol;
		}
		for (let i = s.stack.length - 1; i >= 0; i--) {
			const f = frame(s.stack[i]);
			let cls = isRuntime(f.module) ? 'rt' : '';
			if (i === s.top)
				cls += ' top';
			const where = f.file ? baseName(f.file) + (f.line ? ':' + f.line : '') :
				(f.module ? baseName(f.module) : '');
			ol.appendChild(el('li', { cls: cls.trim(), title: (f.file || '') + (f.module ? '  [' + f.module + ']' : '') }, [
				f.name, f.inlined ? ' (inlined)' : '',
				where ? el('span', { cls: 'where', text: '  ' + where }) : null,
			]));
		}
		return ol;
	}

	/* ---- tooltip --------------------------------------------------------- */

	const tip = document.getElementById('tip');

	function showTip(ev, content) {
		tip.textContent = '';
		addKids(tip, content);
		tip.style.display = 'block';
		const w = tip.offsetWidth, h = tip.offsetHeight;
		let x = ev.clientX + 14, y = ev.clientY + 14;
		if (x + w > window.innerWidth - 4)
			x = Math.max(4, ev.clientX - w - 14);
		if (y + h > window.innerHeight - 4)
			y = Math.max(4, ev.clientY - h - 14);
		tip.style.left = x + 'px';
		tip.style.top = y + 'px';
	}

	function hideTip() {
		tip.style.display = 'none';
	}

	function tipRows(rows) {
		const t = el('table');
		for (const r of rows) {
			if (!r)
				continue;
			t.appendChild(el('tr', null, [
				el('td', null, r[2] ? el('span', { cls: 'sw', style: 'color:' + r[2] }, '\u25a0 ') : null),
				el('td', { text: r[0] }),
				el('td', { cls: 'n', text: r[1] }),
			]));
		}
		return t;
	}

	/* ---- charts over time ------------------------------------------------ */

	const M = { l: 78, r: 16, t: 40, b: 28 };

	/*
	 * A line chart against the dump's time: 'series' of
	 * {key, name, values, cls | color, fill}.  Markers, the peak and the
	 * clients' lifetimes go on the same time axis.
	 */
	function timeChart(box, opt) {
		const W = Math.max(480, box.clientWidth || 900);
		/* up to MANY clients each get a line; more are drawn as a count of those connected */
		const many = opt.clients && opt.clients.length > MANY;
		const lanes = opt.clients && !many ? clientLanes(opt.clients) : null;
		const laneH = lanes ? Math.min(8, lanes.n) * 7 + 18 : many ? 44 : 0;
		const H = opt.height + laneH;
		const x0 = M.l, x1 = W - M.r, y0 = M.t, y1 = opt.height - M.b;
		const ts = opt.t;
		const tmin = opt.from, tmax = Math.max(opt.to, tmin + 1e-9);
		let vmax = 0;
		for (const s of opt.series)
			for (const v of s.values)
				if (v !== null && v > vmax)
					vmax = v;
		if (vmax <= 0)
			vmax = 1;
		const step = niceStep(vmax, 4, true);
		const ytop = Math.ceil(vmax / step) * step;
		const X = t => x0 + (t - tmin) / (tmax - tmin) * (x1 - x0);
		const Y = v => y1 - v / ytop * (y1 - y0);
		const svg = sv('svg', { cls: 'chart', 'data-chart': opt.name, width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': opt.label });

		for (let v = 0; v <= ytop + step / 2; v += step) {
			svg.appendChild(sv('line', { cls: v ? 'grid' : 'axis', x1: x0, x2: x1, y1: Y(v), y2: Y(v) }));
			svg.appendChild(sv('text', { x: x0 - 6, y: Y(v) + 4, 'text-anchor': 'end', text: fmtBytes(v) }));
		}
		const tstep = niceStep(tmax - tmin, Math.max(2, Math.floor((x1 - x0) / 110)), false);
		for (let t = Math.ceil(tmin / tstep) * tstep; t <= tmax + tstep * 1e-6; t += tstep) {
			svg.appendChild(sv('line', { cls: 'axis', x1: X(t), x2: X(t), y1: y1, y2: y1 + 4 }));
			svg.appendChild(sv('text', { x: X(t), y: y1 + 16, 'text-anchor': 'middle', text: fmtSec(Math.abs(t) < tstep * 1e-6 ? 0 : t) }));
		}

		for (const s of opt.series) {
			let d = '', fill = '', started = false, lastX = null;
			for (let i = 0; i < ts.length; i++) {
				const v = s.values[i];
				if (v === null || v === undefined) {
					started = false;
					continue;
				}
				const px = X(ts[i]).toFixed(1), py = Y(v).toFixed(1);
				d += (started ? 'L' : 'M') + px + ' ' + py;
				if (s.fill) {
					fill += (fill ? 'L' : 'M' + px + ' ' + Y(0).toFixed(1) + 'L') + px + ' ' + py;
					lastX = px;
				}
				started = true;
			}
			if (s.fill && fill)
				svg.appendChild(sv('path', { cls: 's-heapfill', d: fill + 'L' + lastX + ' ' + Y(0).toFixed(1) + 'Z' }));
			const p = sv('path', { cls: s.cls || 's-site', d: d, 'data-series': s.key });
			if (s.color)
				p.setAttribute('style', 'stroke:' + s.color);
			svg.appendChild(p);
			/* a value with no neighbour (one sample in a short run) is a dot, not nothing */
			for (let i = 0; i < ts.length; i++) {
				const v = s.values[i];
				if (v === null || v === undefined)
					continue;
				const prev = i > 0 ? s.values[i - 1] : null, next = i + 1 < ts.length ? s.values[i + 1] : null;
				if ((prev === null || prev === undefined) && (next === null || next === undefined))
					svg.appendChild(sv('circle', { cx: X(ts[i]).toFixed(1), cy: Y(v).toFixed(1), r: 2.5, style: 'fill:' + (s.color || cssVar(s.var || '--fg')) }));
			}
		}

		/* markers: dashed lines, labels staggered over three rows */
		if (opt.peak !== undefined && opt.peak !== null && vmax > 1) {
			svg.appendChild(sv('line', { cls: 'peak', x1: X(opt.peak), x2: X(opt.peak), y1: y0, y2: y1 }));
			svg.appendChild(sv('text', { cls: 'peak-label', x: X(opt.peak) + 3, y: y0 + 10, text: 'heap peak' }));
		}
		const mk = sv('g', { cls: 'markers' });
		const rowEnd = [-1e9, -1e9, -1e9];
		(opt.markers || []).forEach(function (m, i) {
			if (m.time_seconds < tmin || m.time_seconds > tmax)
				return;
			const x = X(m.time_seconds);
			mk.appendChild(sv('line', { cls: 'mark', x1: x, x2: x, y1: y0 - 2, y2: y1 }, sv('title', { text: m.label + ' at ' + fmtSec(m.time_seconds) })));
			const w = m.label.length * 6.4 + 8;
			/* a label that would run off the right edge ends at its line instead */
			const right = x + w > W;
			const row = rowEnd.findIndex(e => e < (right ? x - w : x));
			if (row < 0 || i > 200)
				return;
			rowEnd[row] = right ? x : x + w;
			mk.appendChild(sv('text', { cls: 'mark-label', x: right ? x - 2 : x + 2, y: 10 + row * 11, 'text-anchor': right ? 'end' : 'start', 'data-marker': m.label, text: m.label }));
		});
		svg.appendChild(mk);

		if (lanes) {
			const ly = opt.height + 2;
			svg.appendChild(sv('text', { cls: 'lane-label', x: x0 - 6, y: ly + 10, 'text-anchor': 'end', text: 'clients' }));
			const g = sv('g', { cls: 'clients' });
			const shown = Math.min(lanes.n, 8);
			for (const c of lanes.items) {
				const lane = c.lane % shown;
				const y = ly + 4 + lane * 7;
				const b = X(c.begin), e = X(c.end === null ? tmax : c.end);
				const res = c.residue > 0 ? ' res' : '';
				const title = sv('title', { text: c.name + ': ' + fmtSec(c.begin) + ' \u2192 ' + (c.end === null ? 'still connected' : fmtSec(c.end)) + (c.residue ? ', residue ' + fmtBytes(c.residue) : '') });
				g.appendChild(sv('line', { cls: 'client' + res, x1: b, x2: Math.max(e, b + 1.5), y1: y, y2: y, 'data-client': c.id }, title));
				g.appendChild(sv('rect', { cls: 'conn', x: b - 1, y: y - 3, width: 2, height: 6 }));
				if (c.end !== null)
					g.appendChild(sv('rect', { cls: 'disc' + res, x: e - 1, y: y - 3, width: 2, height: 6 }));
			}
			svg.appendChild(g);
		}

		if (many)
			svg.appendChild(connectedArea(opt.clients, X, tmax, x0, opt.height + 4, 30));

		/* hover: a guide and the values at the nearest moment */
		const guide = sv('line', { cls: 'guide', y1: y0, y2: y1, x1: 0, x2: 0, visibility: 'hidden' });
		svg.appendChild(guide);
		const hit = sv('rect', { x: x0, y: y0, width: x1 - x0, height: y1 - y0, fill: 'transparent' });
		hit.addEventListener('mousemove', function (ev) {
			const r = svg.getBoundingClientRect();
			const t = tmin + (ev.clientX - r.left - x0) / (x1 - x0) * (tmax - tmin);
			let lo = 0, hi = ts.length - 1;
			while (lo < hi) {
				const mid = (lo + hi) >> 1;
				if (ts[mid] < t)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo > 0 && Math.abs(ts[lo - 1] - t) < Math.abs(ts[lo] - t))
				lo--;
			guide.setAttribute('x1', X(ts[lo]));
			guide.setAttribute('x2', X(ts[lo]));
			guide.setAttribute('visibility', 'visible');
			const rows = [['time', fmtSec(ts[lo])]];
			for (const s of opt.series)
				rows.push([s.name, s.values[lo] === null ? 'not sampled' : fmtBytes(s.values[lo]), s.color || cssVar(s.var || '--fg')]);
			if (opt.extraTip)
				rows.push(...opt.extraTip(lo));
			showTip(ev, tipRows(rows));
		});
		hit.addEventListener('mouseleave', function () {
			guide.setAttribute('visibility', 'hidden');
			hideTip();
		});
		svg.appendChild(hit);
		return svg;
	}

	const MANY = 400;

	/* The number of clients connected over time, as a step area 'h' pixels high. */
	function connectedArea(list, X, tmax, x0, top, h) {
		const ev = [];
		for (const c of list) {
			ev.push([c.begin, 1]);
			ev.push([c.end === null ? tmax : c.end, -1]);
		}
		ev.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
		let n = 0, max = 0;
		const pts = [];
		for (const e of ev) {
			n += e[1];
			max = Math.max(max, n);
			pts.push([X(e[0]), n]);
		}
		const Y = v => top + h - v / Math.max(1, max) * h;
		let d = 'M' + x0 + ' ' + Y(0), last = 0;
		for (const p of pts) {
			d += 'L' + p[0].toFixed(1) + ' ' + Y(last).toFixed(1) + 'L' + p[0].toFixed(1) + ' ' + Y(p[1]).toFixed(1);
			last = p[1];
		}
		const g = sv('g', { cls: 'clients' });
		g.appendChild(sv('path', { cls: 'client-area', d: d, 'data-series': 'connected' }));
		g.appendChild(sv('text', { cls: 'lane-label', x: x0 - 6, y: top + 10, 'text-anchor': 'end', text: 'clients' }));
		g.appendChild(sv('text', { cls: 'lane-label', x: x0 - 6, y: top + 22, 'text-anchor': 'end', text: 'max ' + max }));
		return g;
	}

	/* Clients in lanes: each lane holds clients that do not overlap. */
	function clientLanes(list) {
		const ends = [];
		const items = [];
		for (const c of list) {
			let lane = ends.findIndex(e => e < c.begin);
			if (lane < 0) {
				lane = ends.length;
				ends.push(0);
			}
			ends[lane] = c.end === null ? Infinity : c.end;
			items.push(Object.assign({ lane: lane }, c));
		}
		return { n: Math.max(1, ends.length), items: items };
	}

	function legend(items) {
		const d = el('div', { cls: 'legend' });
		for (const it of items) {
			d.appendChild(el('span', { cls: 'item', title: it.title || it.name }, [
				el('span', { cls: 'sw' + (it.dash ? ' dash' : '') + (it.box ? ' box' : ''), style: (it.box ? 'background:' : 'border-color:') + it.color }),
				it.name,
			]));
		}
		return d;
	}

	function cssVar(name) {
		return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
	}

	function clientList() {
		const c = D.clients, pc = c.per_client, out = [];
		for (let i = 0; i < c.listed; i++) {
			out.push({
				id: pc.id[i], name: pc.label[i] || ('client ' + pc.id[i]),
				begin: pc.begin_seconds[i], end: pc.end_seconds[i],
				residue: pc.residue_bytes[i], judged: pc.judged[i],
				peak: pc.peak_bytes[i], allocated: pc.allocated_bytes[i],
			});
		}
		return out;
	}

	const redraws = [];

	function drawTimeline() {
		const sec = document.getElementById('timeline');
		const tl = D.timeline;
		if (!tl || !tl.time_seconds.length) {
			sec.appendChild(el('p', { cls: 'note', text: 'No heap events in this dump.' }));
			return;
		}
		sec.appendChild(el('p', { cls: 'note', text: 'RSS, what the allocator holds from the system (mallinfo2 arena + mmapped) and the live heap, sampled at ' + tl.time_seconds.length + ' moments; markers (heaptrail_mark) and the peak as dashed lines' + (D.clients.clients ? ', each client\u2019s connection below the axis (red: it left residue)' : '') + '. Hover for values.' }));
		const box1 = el('div', { cls: 'chartbox' });
		const box2 = el('div', { cls: 'chartbox' });
		sec.appendChild(box1);
		const mem = [
			{ key: 'rss', name: 'RSS', values: tl.rss_bytes, cls: 's-rss', var: '--c-rss' },
			{ key: 'allocator', name: 'allocator-held', values: tl.allocator_bytes, cls: 's-alloc', var: '--c-alloc' },
			/* the highest live heap of each interval, so that a short peak shows */
			{ key: 'heap', name: 'live heap', values: tl.heap_max_bytes, cls: 's-heap', var: '--c-heap', fill: true },
		];
		const sampled = tl.rss_bytes.some(v => v !== null);
		const clients = D.clients.clients ? clientList() : null;
		function draw1() {
			box1.textContent = '';
			box1.appendChild(timeChart(box1, {
				name: 'memory', label: 'memory over time', height: 300, t: tl.time_seconds,
				from: tl.from_seconds, to: tl.to_seconds,
				series: sampled ? mem : [mem[2]], markers: tl.markers, peak: tl.peak_time_seconds,
				clients: clients,
				extraTip: i => [['live heap at ' + fmtSec(tl.time_seconds[i]), fmtBytes(tl.heap_live_bytes[i])], ['allocations so far', fmtCount(tl.allocations[i])]],
			}));
			box1.appendChild(legend([
				{ name: 'RSS', color: cssVar('--c-rss') },
				{ name: 'allocator-held', color: cssVar('--c-alloc'), dash: true },
				{ name: 'live heap', color: cssVar('--c-heap') },
			].slice(sampled ? 0 : 2)));
		}
		draw1();
		redraws.push(draw1);
		if (!sampled)
			sec.appendChild(el('p', { cls: 'note', text: 'This dump has no RSS or allocator samples (HEAPTRAIL_INTERVAL=0?).' }));
		if (tl.sites.length) {
			sec.appendChild(el('h3', { text: 'Live bytes of the sites that held the most' }));
			sec.appendChild(box2);
			const names = tl.sites.map(s => siteName(s.site) + '  ' + siteWhere(site(s.site)));
			const series = tl.sites.map((s, i) => ({
				key: 'site-' + s.site, values: s.live_bytes, color: PALETTE[i % PALETTE.length],
				/* two stacks with the same top frame: tell them apart by site number */
				name: names[i] + (names.indexOf(names[i]) !== names.lastIndexOf(names[i]) ? ' (#' + s.site + ')' : ''),
			}));
			function draw2() {
				box2.textContent = '';
				box2.appendChild(timeChart(box2, {
					name: 'sites', label: 'live bytes per site over time', height: 240, t: tl.time_seconds,
					from: tl.from_seconds, to: tl.to_seconds, series: series, markers: tl.markers,
				}));
				box2.appendChild(legend(series.map(s => ({ name: s.name, color: s.color }))));
			}
			draw2();
			redraws.push(draw2);
		}
	}

	/* ---- summary --------------------------------------------------------- */

	function drawSummary() {
		const sec = document.getElementById('summary');
		const p = D.process, t = D.totals;
		const cmd = (p.argv && p.argv.length ? p.argv.join(' ') : p.exe) || '?';
		document.title = 'heaptrail: ' + baseName(p.exe || cmd);
		sec.appendChild(el('h1', { cls: 'mono', text: cmd }));
		let ended = 'no end record (killed by SIGKILL or the OOM killer, or still running)';
		if (t.end.how === 'exit')
			ended = 'exited with status ' + t.end.status;
		else if (t.end.how === 'signal')
			ended = 'killed by signal ' + t.end.status;
		else if (t.end.how === 'exec')
			ended = 'replaced itself with exec';
		else if (t.end.how === 'unknown')
			ended = 'ended unseen';
		sec.appendChild(el('div', { cls: 'muted', text: 'pid ' + p.pid + (p.forked_child ? ' (a forked child)' : '') + ' \u00b7 ran ' + fmtSec(t.duration_seconds) + ' \u00b7 ' + ended + ' \u00b7 ' + D.dump }));
		if (t.lost_events)
			sec.appendChild(el('div', { cls: 'warn', text: fmtCount(t.lost_events) + (t.lost_events === 1 ? ' event was' : ' events were') + ' lost: every figure is incomplete.' }));
		if (p.sample_bytes)
			sec.appendChild(el('div', { cls: 'warn', text: 'Sampled dump: one allocation per ' + fmtBytes(p.sample_bytes) + ' recorded; counts are estimates.' }));
		if (D.timeline && D.timeline.live)
			sec.appendChild(el('div', { cls: 'warn', text: 'The process was still running: the dump was read up to its last complete frame.' }));
		const exit = t.end.how === 'exit';
		const cards = [
			['peak live heap', fmtBytes(t.peak_live_bytes), 'at ' + fmtSec(t.peak_time_seconds), 'peak'],
			[exit ? 'leaked at exit' : 'live at the end', fmtBytes(t.leaked_bytes), fmtCount(t.leaked_blocks) + ' blocks', 'leaked'],
			['peak RSS', t.peak_rss_bytes ? fmtBytes(t.peak_rss_bytes) : 'not sampled', t.peak_rss_bytes ? 'at ' + fmtSec(t.peak_rss_time_seconds) : '', 'rss'],
			['allocations', fmtCount(t.allocations), fmtCount(t.temporary) + ' temporary', 'allocations'],
			['allocated', fmtBytes(t.allocated_bytes), fmtCount(t.frees) + ' frees', 'allocated'],
		];
		if (D.clients.clients)
			cards.push(['client residue', fmtBytes(D.clients.residue_bytes), fmtCount(D.clients.judged) + ' clients judged, ' + fmtBytes(D.clients.residue_per_client_bytes) + ' each', 'residue']);
		if (D.frag)
			cards.push(['pinned heap', fmtBytes(D.frag.heap.pinned_bytes), 'free but held below live blocks', 'pinned']);
		if (t.mismatches)
			cards.push(['mismatched frees', fmtCount(t.mismatches), 'new/free, malloc/delete ...', 'mismatches']);
		const box = el('div', { cls: 'cards' });
		for (const c of cards)
			box.appendChild(el('div', { cls: 'card', 'data-card': c[3] }, [
				el('div', { cls: 'k', text: c[0] }), el('div', { cls: 'v', text: c[1] }), el('div', { cls: 's', text: c[2] }),
			]));
		sec.appendChild(box);
	}

	/* ---- tables of sites ------------------------------------------------- */

	const CLASS_ORDER = { growing: 0, bounded: 1, transient: 2 };

	const TABLES = [
		{
			key: 'leaked', title: 'Leaked', filter: s => s.leaked_bytes > 0, sort: 'leaked_bytes',
			note: 'Bytes still live when the dump ended, per allocation site.',
			cols: [
				{ key: 'leaked_bytes', label: 'Leaked', fmt: fmtBytes },
				{ key: 'leaked_blocks', label: 'Blocks', fmt: fmtCount },
				{ key: 'allocations', label: 'Allocations', fmt: fmtCount },
				{ key: 'allocated_bytes', label: 'Allocated', fmt: fmtBytes },
			],
		},
		{
			key: 'peak', title: 'Peak', filter: s => s.peak_bytes > 0, sort: 'peak_bytes',
			note: 'Bytes each site held at the moment the live heap peaked, and its own highest.',
			cols: [
				{ key: 'peak_bytes', label: 'At the peak', fmt: fmtBytes },
				{ key: 'peak_share', label: 'Share', get: s => D.totals.peak_live_bytes ? s.peak_bytes / D.totals.peak_live_bytes : 0, fmt: v => (v * 100).toFixed(1) + '%' },
				{ key: 'max_live_bytes', label: 'Own highest', fmt: fmtBytes },
				{ key: 'allocations', label: 'Allocations', fmt: fmtCount },
			],
		},
		{
			key: 'growth', title: 'Growth', filter: s => !!s.growth, sort: 'class',
			note: 'Live bytes fitted against time: growing sites rise steadily to the end, bounded ones rose and stayed, transient ones come and go (heaptrail growth).',
			cols: [
				{ key: 'class', label: 'Class', get: s => CLASS_ORDER[s.growth.class] * 1e18 - (s.growth.class === 'growing' ? s.growth.growth_bytes_per_second * s.growth.r2 : s.max_live_bytes), asc: true, fmt: (v, s) => el('span', { cls: 'cls-' + s.growth.class, text: s.growth.class }) },
				{ key: 'growth_bytes_per_second', label: 'Growth', get: s => s.growth.growth_bytes_per_second, fmt: fmtRate },
				{ key: 'r2', label: 'R\u00b2', get: s => s.growth.r2, fmt: v => v.toFixed(3) },
				{ key: 'leaked_bytes', label: 'Live at end', fmt: fmtBytes },
				{ key: 'max_live_bytes', label: 'Own highest', fmt: fmtBytes },
			],
		},
		{
			key: 'allocations', title: 'Allocations', filter: s => s.allocations > 0, sort: 'allocations',
			note: 'Number of allocations per site; temporary ones were freed before the thread allocated anything else.',
			cols: [
				{ key: 'allocations', label: 'Allocations', fmt: fmtCount },
				{ key: 'allocated_bytes', label: 'Allocated', fmt: fmtBytes },
				{ key: 'temporary', label: 'Temporary', fmt: fmtCount },
				{ key: 'temp_share', label: 'Temporary %', get: s => s.allocations ? s.temporary / s.allocations : 0, fmt: v => (v * 100).toFixed(0) + '%' },
				{ key: 'frees', label: 'Frees', fmt: fmtCount },
			],
		},
	];

	const PAGE = 50;

	function value(col, s) {
		return col.get ? col.get(s) : s[col.key];
	}

	/* A sortable table of sites; a click on a row shows its stack. */
	function siteTable(def, rows, filterText) {
		const wrap = el('div', { 'data-table-wrap': def.key });
		const state = { key: def.sort, asc: false, limit: PAGE };
		const sortCol = def.cols.find(c => c.key === def.sort);
		if (sortCol && sortCol.asc)
			state.asc = true;
		const table = el('table', { cls: 'sites', 'data-table': def.key });
		const thead = el('thead');
		const tbody = el('tbody');
		table.appendChild(thead);
		table.appendChild(tbody);
		const more = el('div', { cls: 'more' });

		function render() {
			const ft = filterText().toLowerCase();
			let list = rows.filter(def.filter);
			if (ft)
				list = list.filter(s => ((s.label || '') + ' ' + (s.function || '') + ' ' + (s.file || '')).toLowerCase().includes(ft));
			const col = def.cols.find(c => c.key === state.key) || def.cols[0];
			list.sort(function (a, b) {
				const x = value(col, a), y = value(col, b);
				if (x !== y)
					return (x < y ? -1 : 1) * (state.asc ? 1 : -1);
				return a.site - b.site;
			});
			thead.textContent = '';
			const hr = el('tr', null, [el('th', { cls: 'rank', text: '#' }), el('th', { cls: 'site', text: 'Site' })]);
			for (const c of def.cols) {
				const th = el('th', { text: c.label, cls: c.key === state.key ? 'sorted' + (state.asc ? ' asc' : '') : '', 'data-key': c.key, title: 'sort by ' + c.label });
				th.addEventListener('click', function () {
					if (state.key === c.key)
						state.asc = !state.asc;
					else {
						state.key = c.key;
						state.asc = !!c.asc;
					}
					render();
				});
				hr.appendChild(th);
			}
			thead.appendChild(hr);
			tbody.textContent = '';
			list.slice(0, state.limit).forEach(function (s, i) {
				const tr = el('tr', { cls: 'row', 'data-site': s.site, title: 'click for the stack' });
				tr.appendChild(el('td', { cls: 'rank', text: i + 1 }));
				tr.appendChild(siteCell(s.site));
				for (const c of def.cols) {
					const v = value(c, s);
					tr.appendChild(el('td', { 'data-key': c.key, 'data-value': v }, c.fmt(v, s)));
				}
				tr.addEventListener('click', function () {
					const next = tr.nextSibling;
					if (next && next.classList.contains('detail')) {
						next.remove();
						return;
					}
					const d = el('tr', { cls: 'detail' }, el('td', { colspan: def.cols.length + 2 }, stackList(s.site)));
					tr.after(d);
				});
				tbody.appendChild(tr);
			});
			if (!list.length)
				tbody.appendChild(el('tr', null, el('td', { colspan: def.cols.length + 2, cls: 'site muted', text: ft ? 'no site matches' : 'none' })));
			more.textContent = '';
			if (list.length > state.limit)
				more.appendChild(el('button', {
					type: 'button', text: 'show all ' + fmtCount(list.length) + ' sites', onclick: function () {
						state.limit = Infinity;
						render();
					},
				}));
			else if (list.length > PAGE)
				more.appendChild(el('span', { cls: 'muted', text: fmtCount(list.length) + ' sites' }));
		}
		wrap.appendChild(table);
		wrap.appendChild(more);
		wrap.render = render;
		render();
		return wrap;
	}

	function drawTables() {
		const sec = document.getElementById('sites');
		const tabs = el('div', { cls: 'tabs' });
		const filter = el('input', { type: 'search', placeholder: 'filter by function or file', 'aria-label': 'filter sites' });
		const note = el('p', { cls: 'note' });
		const body = el('div');
		sec.appendChild(tabs);
		sec.appendChild(note);
		sec.appendChild(body);
		const tables = [];
		const buttons = [];
		const want = hashParam('tab') || 'leaked';
		TABLES.forEach(function (def, i) {
			const t = siteTable(def, D.sites, () => filter.value);
			body.appendChild(t);
			tables.push(t);
			const b = el('button', { type: 'button', 'data-tab': def.key, text: def.title });
			b.addEventListener('click', () => select(i));
			buttons.push(b);
			tabs.appendChild(b);
		});
		tabs.appendChild(el('span', { cls: 'grow' }));
		tabs.appendChild(filter);
		filter.addEventListener('input', () => tables.forEach(t => t.render()));
		function select(k) {
			tables.forEach((t, i) => { t.style.display = i === k ? '' : 'none'; });
			buttons.forEach((b, i) => b.classList.toggle('on', i === k));
			note.textContent = TABLES[k].note + ' Click a column to sort, a row for its stack.';
		}
		select(Math.max(0, TABLES.findIndex(d => d.key === want)));
		if (D.other_sites && D.other_sites.sites)
			sec.appendChild(el('p', { cls: 'note', text: fmtCount(D.other_sites.sites) + ' smaller sites are not listed (heaptrail html --max-sites); the flame graph shows them as [other sites].' }));
	}

	/* ---- flame graph ----------------------------------------------------- */

	const COST_KEY = {
		leaked: 'leaked_bytes', peak: 'peak_bytes', allocations: 'allocations',
		temporary: 'temporary', residue: 'residue_bytes', allocated: 'allocated_bytes',
	};
	const COST_TEXT = {
		leaked: 'bytes live at the end', peak: 'bytes live at the peak',
		allocations: 'allocations', temporary: 'temporary allocations',
		residue: 'bytes left by disconnected clients', allocated: 'bytes allocated',
	};

	function isBytes(cost) {
		return cost !== 'allocations' && cost !== 'temporary';
	}

	function flameTree(cost) {
		const key = COST_KEY[cost];
		const root = { name: 'all', value: 0, self: 0, kids: new Map(), parent: null, depth: 0, module: null, files: new Set() };
		function child(node, name, f) {
			let c = node.kids.get(name);
			if (!c) {
				c = { name: name, value: 0, self: 0, kids: new Map(), parent: node, depth: node.depth + 1, module: f ? f.module : null, files: new Set() };
				node.kids.set(name, c);
			}
			return c;
		}
		for (const s of D.sites) {
			const v = s[key];
			if (!v)
				continue;
			root.value += v;
			let node = root;
			if (!s.stack.length) {
				node = child(node, '[no stack]', null);
				node.value += v;
			}
			for (const fi of s.stack) {
				const f = frame(fi);
				node = child(node, f.name, f);
				node.value += v;
				if (f.file && node.files.size < 4)
					node.files.add(baseName(f.file) + (f.line ? ':' + f.line : ''));
			}
			node.self += v;
		}
		const o = D.other_sites && D.other_sites[key];
		if (o) {
			root.value += o;
			const n = child(root, '[other sites]', null);
			n.value += o;
			n.self += o;
		}
		return root;
	}

	function drawFlame() {
		const sec = document.getElementById('flame');
		const available = D.costs.filter(c => c !== 'residue' || D.clients.residue_bytes > 0);
		let cost = hashParam('cost');
		if (!available.includes(cost))
			cost = D.totals.leaked_bytes > 0 ? 'leaked' : 'peak';
		const select = el('select', { 'aria-label': 'cost' });
		for (const c of available)
			select.appendChild(el('option', { value: c, text: c + ' (' + COST_TEXT[c] + ')', selected: c === cost }));
		const search = el('input', { type: 'search', placeholder: 'highlight functions', 'aria-label': 'highlight functions' });
		const reset = el('button', { type: 'button', text: 'reset zoom' });
		const status = el('div', { cls: 'flame-status' });
		const box = el('div', { id: 'flame-chart' });
		sec.appendChild(el('p', { cls: 'note', text: 'Icicle graph: the program\u2019s entry at the top, each row the functions called from the one above it, widths proportional to the cost; the allocating function is at the bottom of each stack. Click a frame to zoom into it, an upper frame to zoom out.' }));
		sec.appendChild(el('div', { cls: 'tabs' }, [el('label', null, ['cost ', select]), reset, el('span', { cls: 'grow' }), search]));
		sec.appendChild(box);
		sec.appendChild(status);
		let root = null, focus = null;

		function color(n) {
			if (n.name.startsWith('['))
				return 'hsl(0 0% 60%)';
			const h = hashStr(n.name);
			if (isRuntime(n.module))
				return 'hsl(' + (200 + h % 30) + ' 35% var(--flame-rt-l))';
			return 'hsl(' + (h % 55) + ' var(--flame-s) calc(var(--flame-l) + ' + ((h >> 8) % 10) + '%))';
		}

		function fmtV(v) {
			return isBytes(cost) ? fmtBytes(v) : fmtCount(v);
		}

		function describe(n) {
			const files = n.files.size ? '  ' + Array.from(n.files).join(', ') : '';
			return n.name + ' \u2014 ' + fmtV(n.value) + ' (' + pct(n.value, root.value) + ' of all' + (n.self ? ', ' + fmtV(n.self) + ' allocated here' : '') + ')' + files;
		}

		function render() {
			box.textContent = '';
			if (!root.value) {
				box.appendChild(el('p', { cls: 'note', text: 'Nothing to draw: no ' + COST_TEXT[cost] + ' in this dump.' }));
				return;
			}
			const W = Math.max(480, box.clientWidth || 900), RH = 19;
			const chain = [];
			for (let n = focus; n; n = n.parent)
				chain.unshift(n);
			const items = [];
			let maxDepth = 0;
			/* the focus and its ancestors span the width; below it, widths by value */
			chain.forEach(function (n, i) {
				items.push({ n: n, x: 0, w: W, y: i, anc: n !== focus });
			});
			(function walk(n, x, depth) {
				const scale = W / focus.value;
				let cx = x;
				const kids = Array.from(n.kids.values()).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
				for (const k of kids) {
					const w = k.value * scale;
					if (w >= 0.4) {
						items.push({ n: k, x: cx, w: w, y: depth });
						if (depth > maxDepth)
							maxDepth = depth;
						walk(k, cx, depth + 1);
					}
					cx += w;
				}
			})(focus, 0, chain.length);
			maxDepth = Math.max(maxDepth, chain.length - 1);
			const svg = sv('svg', { cls: 'chart flame', 'data-chart': 'flame', 'data-cost': cost, 'data-total': root.value, width: W, height: (maxDepth + 1) * RH + 2 });
			const q = search.value.trim().toLowerCase();
			let matched = 0;
			const counted = new Set();
			for (const it of items) {
				const n = it.n;
				const isMatch = q && n.name.toLowerCase().includes(q);
				if (isMatch) {
					/* count a match once, not again inside a matching caller */
					let p = n.parent, inside = false;
					for (; p; p = p.parent)
						if (counted.has(p))
							inside = true;
					if (!inside) {
						matched += n.value;
						counted.add(n);
					}
				}
				const g = sv('g', { cls: (isMatch ? 'match' : '') + (it.anc ? ' ancestor' : ''), 'data-name': n.name, 'data-value': n.value, 'data-depth': n.depth }, [
					sv('rect', { x: it.x.toFixed(2), y: it.y * RH, width: Math.max(0.5, it.w - 0.6).toFixed(2), height: RH - 1, rx: 2, style: 'fill:' + color(n) }),
					sv('title', { text: describe(n) }),
				]);
				if (it.w > 30) {
					const chars = Math.floor((it.w - 8) / 6.6);
					const label = n.name.length > chars ? n.name.slice(0, Math.max(1, chars - 1)) + '\u2026' : n.name;
					g.appendChild(sv('text', { x: it.x + 4, y: it.y * RH + 13.5, text: label }));
				}
				g.addEventListener('click', function () {
					focus = n;
					render();
				});
				g.addEventListener('mouseenter', () => { status.textContent = describe(n); });
				svg.appendChild(g);
			}
			box.appendChild(svg);
			status.textContent = (focus === root ? 'all stacks: ' + fmtV(root.value) + ' (' + COST_TEXT[cost] + ')' : 'zoomed into ' + describe(focus)) +
				(q ? '  \u00b7  matching \u201c' + search.value.trim() + '\u201d: ' + fmtV(matched) + ' (' + pct(matched, root.value) + ')' : '');
		}

		function rebuild() {
			cost = select.value;
			root = flameTree(cost);
			focus = root;
			render();
		}
		select.addEventListener('change', rebuild);
		search.addEventListener('input', render);
		reset.addEventListener('click', function () {
			focus = root;
			render();
		});
		rebuild();
		redraws.push(render);
	}

	/* ---- clients --------------------------------------------------------- */

	function barChart(box, opt) {
		const W = Math.max(480, box.clientWidth || 900), H = opt.height;
		const x0 = M.l, x1 = W - M.r, y0 = 12, y1 = H - M.b;
		const n = opt.values.length;
		const per = Math.max(1, Math.ceil(n / Math.floor((x1 - x0) / 3)));
		const bins = [];
		for (let i = 0; i < n; i += per) {
			let max = 0, sum = 0, k = 0;
			for (let j = i; j < Math.min(n, i + per); j++) {
				max = Math.max(max, opt.values[j]);
				sum += opt.values[j];
				k++;
			}
			bins.push({ from: i, to: i + k - 1, max: max, mean: sum / k });
		}
		let vmax = Math.max(1, ...bins.map(b => b.max));
		const step = niceStep(vmax, 4, true);
		vmax = Math.ceil(vmax / step) * step;
		const Y = v => y1 - v / vmax * (y1 - y0);
		const svg = sv('svg', { cls: 'chart', 'data-chart': opt.name, width: W, height: H });
		for (let v = 0; v <= vmax + step / 2; v += step) {
			svg.appendChild(sv('line', { cls: v ? 'grid' : 'axis', x1: x0, x2: x1, y1: Y(v), y2: Y(v) }));
			svg.appendChild(sv('text', { x: x0 - 6, y: Y(v) + 4, 'text-anchor': 'end', text: fmtBytes(v) }));
		}
		const bw = (x1 - x0) / bins.length;
		bins.forEach(function (b, i) {
			const v = per > 1 ? b.max : b.mean;
			const r = sv('rect', {
				cls: 'bar' + (v > 0 ? ' res' : ''), x: (x0 + i * bw + (bw > 4 ? 1 : 0)).toFixed(2), y: Y(v).toFixed(2),
				width: Math.max(1, bw - (bw > 4 ? 2 : 0)).toFixed(2), height: Math.max(0, y1 - Y(v)).toFixed(2),
				'data-client': per === 1 ? opt.ids[b.from] : null, 'data-value': v,
			});
			r.addEventListener('mousemove', ev => showTip(ev, opt.tip(b, per)));
			r.addEventListener('mouseleave', hideTip);
			svg.appendChild(r);
		});
		const lstep = Math.max(1, Math.ceil(bins.length / 10));
		for (let i = 0; i < bins.length; i += lstep)
			svg.appendChild(sv('text', { x: x0 + (i + 0.5) * bw, y: y1 + 16, 'text-anchor': 'middle', text: String(bins[i].from + 1) }));
		svg.appendChild(sv('text', { x: x1, y: H - 2, 'text-anchor': 'end', text: opt.xlabel }));
		box.appendChild(svg);
	}

	function lineChartK(box, opt) {
		const W = Math.max(480, box.clientWidth || 900), H = opt.height;
		const x0 = M.l, x1 = W - M.r, y0 = 12, y1 = H - M.b;
		const n = opt.values.length;
		let vmax = Math.max(1, ...opt.values);
		const step = niceStep(vmax, 4, true);
		vmax = Math.ceil(vmax / step) * step;
		const X = k => x0 + (n > 1 ? k / (n - 1) : 0.5) * (x1 - x0);
		const Y = v => y1 - v / vmax * (y1 - y0);
		const svg = sv('svg', { cls: 'chart', 'data-chart': opt.name, width: W, height: H });
		for (let v = 0; v <= vmax + step / 2; v += step) {
			svg.appendChild(sv('line', { cls: v ? 'grid' : 'axis', x1: x0, x2: x1, y1: Y(v), y2: Y(v) }));
			svg.appendChild(sv('text', { x: x0 - 6, y: Y(v) + 4, 'text-anchor': 'end', text: fmtBytes(v) }));
		}
		let d = '';
		opt.values.forEach((v, k) => { d += (k ? 'L' : 'M') + X(k).toFixed(1) + ' ' + Y(v).toFixed(1); });
		svg.appendChild(sv('path', { cls: 's-heap', d: d, 'data-series': 'cumulative' }));
		const ks = niceStep(n, 8, false);
		for (let k = 0; k < n; k += Math.max(1, ks))
			svg.appendChild(sv('text', { x: X(k), y: y1 + 16, 'text-anchor': 'middle', text: String(k + 1) }));
		svg.appendChild(sv('text', { x: x1, y: H - 2, 'text-anchor': 'end', text: opt.xlabel }));
		box.appendChild(svg);
	}

	function drawClients() {
		const sec = document.getElementById('clients');
		const c = D.clients;
		if (!c.clients) {
			sec.appendChild(el('p', { cls: 'note', text: 'No clients in this dump. Mark sessions with heaptrail_client_begin()/_end() (heaptrail.h), or record with --clients=sockets or --clients=threads.' }));
			return;
		}
		sec.appendChild(el('p', { cls: 'note', text: fmtCount(c.clients) + ' clients, ' + fmtCount(c.disconnected) + ' disconnected, ' + fmtCount(c.judged) + ' judged (gone for more than the ' + fmtSec(c.grace_seconds) + ' grace), ' + fmtCount(c.connected_at_end) + ' still connected at the end. Residue: the bytes a client allocated that were still live at the end although it had gone; ' + fmtBytes(c.residue_bytes) + ' in all, ' + fmtBytes(c.residue_per_client_bytes) + ' per judged client (median ' + fmtBytes(c.residue_median_bytes) + ', most ' + fmtBytes(c.residue_max_bytes) + ').' }));
		const list = clientList();
		if (c.listed < c.clients)
			sec.appendChild(el('p', { cls: 'note', text: 'The charts show the first ' + fmtCount(c.listed) + ' clients.' }));
		const grid = el('div', { cls: 'grid2' });
		const b1 = el('div', { cls: 'chartbox' }), b2 = el('div', { cls: 'chartbox' });
		grid.appendChild(el('div', null, [el('h3', { text: 'Residue per client, in order of connection' }), b1]));
		grid.appendChild(el('div', null, [el('h3', { text: 'Residue so far, after each disconnect' }), b2]));
		sec.appendChild(grid);
		const gone = list.filter(x => x.judged).sort((a, b) => a.end - b.end);
		const cum = [];
		let sum = 0;
		for (const x of gone) {
			sum += x.residue;
			cum.push(sum);
		}
		function draw() {
			b1.textContent = '';
			b2.textContent = '';
			barChart(b1, {
				name: 'residue', height: 220, values: list.map(x => x.residue), ids: list.map(x => x.id), xlabel: 'client',
				tip: function (b, per) {
					if (per === 1) {
						const x = list[b.from];
						return [el('b', { text: x.name }), tipRows([
							['connected', fmtSec(x.begin)], ['disconnected', x.end === null ? 'still connected' : fmtSec(x.end)],
							['allocated', fmtBytes(x.allocated)], ['own peak', fmtBytes(x.peak)],
							['residue', x.judged ? fmtBytes(x.residue) : 'not judged'],
						])];
					}
					return [el('b', { text: 'clients ' + (b.from + 1) + '\u2013' + (b.to + 1) }), tipRows([['most residue', fmtBytes(b.max)], ['mean', fmtBytes(b.mean)]])];
				},
			});
			if (cum.length)
				lineChartK(b2, { name: 'residue-cumulative', height: 220, values: cum, xlabel: 'disconnected clients' });
			else
				b2.appendChild(el('p', { cls: 'note', text: 'No client has been judged yet.' }));
		}
		draw();
		redraws.push(draw);
		sec.appendChild(el('p', { cls: 'note', text: 'A leak per client makes the right-hand curve a straight rise; a cache shared by clients levels off.' }));
		if (c.sites.length) {
			sec.appendChild(el('h3', { text: 'Sites holding residue' }));
			const t = el('table', { cls: 'sites', 'data-table': 'residue' });
			t.appendChild(el('thead', null, el('tr', null, [
				el('th', { cls: 'rank', text: '#' }), el('th', { cls: 'site', text: 'Site' }), el('th', { text: 'Residue' }),
				el('th', { text: 'Blocks' }), el('th', { text: 'Clients' }), el('th', { text: 'Per client' }), el('th', { text: 'Trend' }),
			])));
			const rows = c.sites.slice(0, 200).map(function (s, i) {
				const tr = el('tr', { cls: 'row', 'data-site': s.site }, [
					el('td', { cls: 'rank', text: i + 1 }), siteCell(s.site),
					el('td', { 'data-key': 'residue_bytes', 'data-value': s.residue_bytes, text: fmtBytes(s.residue_bytes) }),
					el('td', { text: fmtCount(s.residue_blocks) }),
					el('td', { text: fmtCount(s.clients_with_residue) }),
					el('td', { text: fmtBytes(c.judged ? s.residue_bytes / c.judged : 0) }),
					el('td', { cls: 'trend-' + s.trend, text: s.trend }),
				]);
				tr.addEventListener('click', function () {
					const next = tr.nextSibling;
					if (next && next.classList.contains('detail'))
						return next.remove();
					tr.after(el('tr', { cls: 'detail' }, el('td', { colspan: 7 }, stackList(s.site))));
				});
				return tr;
			});
			shortTable(sec, t, rows);
		}
	}

	/* The first SHORT rows of a long plain table, and a button for the rest. */
	const SHORT = 15;

	function shortTable(sec, table, rows) {
		const tb = el('tbody');
		rows.forEach((tr, i) => {
			if (i >= SHORT)
				tr.style.display = 'none';
			tb.appendChild(tr);
		});
		table.appendChild(tb);
		sec.appendChild(table);
		if (rows.length > SHORT) {
			const b = el('button', { type: 'button', cls: 'more', text: 'show all ' + rows.length + ' rows' });
			b.addEventListener('click', function () {
				rows.forEach(tr => { tr.style.display = ''; });
				b.remove();
			});
			sec.appendChild(b);
		}
	}

	/* ---- fragmentation --------------------------------------------------- */

	function ladder(rows) {
		const max = Math.max(1, ...rows.map(r => r[1] || 0));
		const g = el('div', { cls: 'ladder' });
		rows.forEach(function (r, i) {
			g.appendChild(el('div', { text: r[0], title: r[2] }));
			g.appendChild(el('div', null, el('div', { cls: 'b l' + (i + 1), style: 'width:' + ((r[1] || 0) / max * 100).toFixed(2) + '%' })));
			g.appendChild(el('div', { cls: 'n', text: r[1] === null ? 'not sampled' : fmtBytes(r[1]) }));
		});
		return g;
	}

	function ladderRows(l) {
		const s = l.sample;
		return [
			['requested (live heap)', l.requested_bytes, 'bytes the program asked for'],
			['usable', l.usable_bytes, 'their usable sizes (malloc_usable_size)'],
			['pages holding live blocks', l.live_page_bytes, 'pages with at least one live byte'],
			['allocator-held', s ? s.allocator_held_bytes : null, 'mallinfo2 arena + hblkhd'],
			['RSS', s ? s.rss_bytes : null, 'resident set size'],
		];
	}

	function mapColors() {
		const st = getComputedStyle(document.documentElement);
		return { free: st.getPropertyValue('--map-free').trim(), bg: st.getPropertyValue('--map-empty').trim(), dark: st.getPropertyValue('color-scheme').trim() === 'dark' };
	}

	/* Occupancy 1..levels-1 from red (mostly free: pinned waste) to teal (full). */
	function occColor(level, levels, dark) {
		const f = (level - 1) / (levels - 2);
		const hue = 5 + f * 170;
		return 'hsl(' + hue.toFixed(0) + ' ' + (dark ? 55 : 62) + '% ' + (dark ? 52 : 50) + '%)';
	}

	const LEVEL_CHARS = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_';

	function drawPageMap(box, pm) {
		box.textContent = '';
		const W = Math.max(480, box.clientWidth || 900);
		let total = 0;
		for (const hp of pm.heaps)
			total += hp.occupied.length;
		if (!total)
			return;
		const cell = Math.max(3, Math.min(14, Math.floor(Math.sqrt(W * 420 / total))));
		const cols = Math.floor(W / cell);
		const colors = mapColors();
		pm.heaps.forEach(function (hp, hi) {
			const n = hp.occupied.length;
			const rows = Math.ceil(n / cols);
			const span = hp.pages * pm.page_size;
			box.appendChild(el('div', { cls: 'heaplabel mono', text: 'heap ' + (hi + 1) + ' at ' + hp.start + ': ' + fmtCount(hp.pages) + ' pages (' + fmtBytes(span) + ')' + (pm.cell_pages > 1 ? ', ' + pm.cell_pages + ' pages per cell' : '') }));
			const cv = el('canvas', { cls: 'pagemap', 'data-chart': 'pagemap', 'data-cells': n, 'data-heap': hi });
			const dpr = window.devicePixelRatio || 1;
			cv.width = cols * cell * dpr;
			cv.height = rows * cell * dpr;
			cv.style.width = cols * cell + 'px';
			cv.style.height = rows * cell + 'px';
			const ctx = cv.getContext('2d');
			ctx.scale(dpr, dpr);
			ctx.fillStyle = colors.bg;
			ctx.fillRect(0, 0, cols * cell, rows * cell);
			const gap = cell >= 5 ? 1 : 0;
			for (let i = 0; i < n; i++) {
				const lv = LEVEL_CHARS.indexOf(hp.occupied[i]);
				ctx.fillStyle = lv <= 0 ? colors.free : occColor(lv, pm.levels, colors.dark);
				ctx.fillRect((i % cols) * cell, Math.floor(i / cols) * cell, cell - gap, cell - gap);
			}
			cv.addEventListener('mousemove', function (ev) {
				const r = cv.getBoundingClientRect();
				const i = Math.floor((ev.clientY - r.top) / cell) * cols + Math.floor((ev.clientX - r.left) / cell);
				if (i < 0 || i >= n)
					return hideTip();
				const lv = LEVEL_CHARS.indexOf(hp.occupied[i]);
				const fr = LEVEL_CHARS.indexOf(hp.free_pages[i]);
				const pages = Math.min(pm.cell_pages, hp.pages - i * pm.cell_pages);
				const addr = BigInt(hp.start) + BigInt(i * pm.cell_pages * pm.page_size);
				const sid = hp.sites[i];
				showTip(ev, [el('b', { cls: 'mono', text: '0x' + addr.toString(16) }), tipRows([
					['pages', String(pages)],
					['occupied', lv <= 0 ? 'nothing live' : lv === pm.levels - 1 ? 'full' : '~' + Math.round((lv - 1) / (pm.levels - 2) * 100) + '%'],
					pm.cell_pages > 1 ? ['wholly free pages', '~' + Math.round(fr / (pm.levels - 1) * pages)] : null,
					sid ? ['most bytes from', site(sid) ? siteName(sid) + '  ' + siteWhere(site(sid)) : 'a small site (#' + sid + ', not in this report)'] : null,
				])]);
			});
			cv.addEventListener('mouseleave', hideTip);
			box.appendChild(cv);
		});
	}

	function drawFrag() {
		const sec = document.getElementById('frag');
		const f = D.frag;
		if (!f) {
			sec.appendChild(el('p', { cls: 'note', text: 'Not in this report: the dump is a compact one (heaptrail pack --compact), which keeps no block addresses. Run heaptrail html on the dump as it was recorded for the fragmentation and the page map.' }));
			return;
		}
		const hp = f.heap;
		sec.appendChild(el('p', { cls: 'note', text: 'Why RSS stays above live bytes (heaptrail frag). The ladder at the end of the dump' + (f.ladder.sample ? ' (sample at ' + fmtSec(f.ladder.sample.time_seconds) + ')' : '') + ':' }));
		const grid = el('div', { cls: 'grid2' });
		grid.appendChild(el('div', null, [el('h3', { text: 'At the end' }), ladder(ladderRows(f.ladder))]));
		if (f.peak && f.peak.requested_bytes)
			grid.appendChild(el('div', null, [el('h3', { text: 'At the peak of live heap (' + fmtSec(f.peak.time_seconds) + ')' }), ladder(ladderRows(f.peak))]));
		sec.appendChild(grid);
		sec.appendChild(el('p', { cls: 'note', text: 'Heap span ' + fmtBytes(hp.heap_span_bytes) + ' in ' + fmtCount(hp.heaps) + ' heap(s): ' + fmtBytes(hp.occupied_bytes) + ' occupied by live blocks, ' + fmtBytes(hp.pinned_bytes) + ' free but pinned below live blocks (' + fmtBytes(hp.pinned_page_bytes) + ' on pages shared with live blocks, ' + fmtBytes(hp.releasable_bytes) + ' in whole free pages malloc_trim(0) could return).' }));
		const pm = D.page_map;
		if (pm && pm.heaps.length) {
			sec.appendChild(el('h3', { text: 'Page map of the heaps at the end' }));
			const lg = el('div', { cls: 'maplegend' });
			const grad = [];
			for (let i = 1; i < pm.levels; i += 7)
				grad.push(occColor(i, pm.levels, mapColors().dark));
			lg.appendChild(el('span', null, [el('span', { cls: 'sq', style: 'background:var(--map-free)' }), 'no live byte (free page)']));
			lg.appendChild(el('span', null, ['mostly free', el('span', { cls: 'grad', style: 'background:linear-gradient(90deg,' + grad.join(',') + ')' }), 'full']));
			lg.appendChild(el('span', { cls: 'muted', text: 'one cell = ' + pm.cell_pages + ' page' + (pm.cell_pages > 1 ? 's' : '') + ' of ' + fmtBytes(pm.page_size) + '; hover for the site' }));
			sec.appendChild(lg);
			const box = el('div', { cls: 'chartbox' });
			sec.appendChild(box);
			const draw = () => drawPageMap(box, pm);
			draw();
			redraws.push(draw);
		} else {
			sec.appendChild(el('p', { cls: 'note', text: 'No live malloc heap block at the end: no page map to draw.' }));
		}
		if (f.pinners.length) {
			sec.appendChild(el('h3', { text: 'Sites whose live blocks pin free memory' }));
			const t = el('table', { cls: 'sites', 'data-table': 'pinners' });
			t.appendChild(el('thead', null, el('tr', null, [
				el('th', { cls: 'rank', text: '#' }), el('th', { cls: 'site', text: 'Site' }), el('th', { text: 'Pinned' }),
				el('th', { text: 'On shared pages' }), el('th', { text: 'Whole pages' }), el('th', { text: 'Live' }), el('th', { text: 'Blocks' }),
			])));
			shortTable(sec, t, f.pinners.map(function (p, i) {
				return el('tr', { 'data-site': p.site }, [
					el('td', { cls: 'rank', text: i + 1 }), siteCell(p.site),
					el('td', { 'data-key': 'pinned_bytes', 'data-value': p.pinned_bytes, text: fmtBytes(p.pinned_bytes) }),
					el('td', { text: fmtBytes(p.pinned_page_bytes) }), el('td', { text: fmtBytes(p.releasable_bytes) }),
					el('td', { text: fmtBytes(p.live_bytes) }), el('td', { text: fmtCount(p.live_blocks) }),
				]);
			}));
		}
		if (f.growth.length) {
			sec.appendChild(el('h3', { text: 'Blocks grown step by step' }));
			const t = el('table', { cls: 'sites', 'data-table': 'frag-growth' });
			t.appendChild(el('thead', null, el('tr', null, [
				el('th', { cls: 'rank', text: '#' }), el('th', { cls: 'site', text: 'Site' }), el('th', { text: 'Pattern' }),
				el('th', { text: 'Steps' }), el('th', { text: 'Mean ratio' }), el('th', { text: 'Largest' }),
			])));
			shortTable(sec, t, f.growth.map(function (g, i) {
				return el('tr', { 'data-site': g.site }, [
					el('td', { cls: 'rank', text: i + 1 }), siteCell(g.site),
					el('td', { cls: g.pattern === 'exact-fit' ? 'cls-growing' : '', text: g.pattern }),
					el('td', { text: fmtCount(g.grows) }), el('td', { text: g.mean_ratio.toFixed(2) }),
					el('td', { text: fmtBytes(g.max_size_bytes) }),
				]);
			}));
			sec.appendChild(el('p', { cls: 'note', text: 'Exact-fit growth (a little more each time) leaves a trail of freed blocks of every size behind; geometric growth (doubling) does not.' }));
		}
	}

	/* ---- theme, hash, start ---------------------------------------------- */

	function hashParam(name) {
		const m = new RegExp('[#&]' + name + '=([^&]*)').exec(location.hash);
		return m ? decodeURIComponent(m[1]) : null;
	}

	const THEMES = ['auto', 'light', 'dark'];

	function applyTheme(t) {
		if (t === 'light' || t === 'dark')
			document.documentElement.dataset.theme = t;
		else
			delete document.documentElement.dataset.theme;
		document.getElementById('theme').textContent = 'theme: ' + (THEMES.includes(t) ? t : 'auto');
	}

	function storedTheme() {
		try {
			return localStorage.getItem('heaptrail-theme');
		} catch (e) {
			return null;	/* storage refused for file:// pages: no memory, no harm */
		}
	}

	function setupTheme() {
		let t = hashParam('theme') || storedTheme() || 'auto';
		applyTheme(t);
		document.getElementById('theme').addEventListener('click', function () {
			t = THEMES[(THEMES.indexOf(t) + 1) % THEMES.length];
			applyTheme(t);
			try {
				localStorage.setItem('heaptrail-theme', t);
			} catch (e) {
				/* as above */
			}
			redraws.forEach(f => f());
		});
		if (window.matchMedia)
			window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => redraws.forEach(f => f()));
	}

	function guarded(name, fn) {
		try {
			fn();
		} catch (e) {
			showError(name + ': ' + (e && e.message ? e.message : e));
			console.error(e);
		}
	}

	function start() {
		D = JSON.parse(document.getElementById('heaptrail-data').textContent);
		SITES = new Map(D.sites.map(s => [s.site, s]));
		setupTheme();
		guarded('summary', drawSummary);
		guarded('timeline', drawTimeline);
		guarded('tables', drawTables);
		guarded('flame graph', drawFlame);
		guarded('clients', drawClients);
		guarded('fragmentation', drawFrag);
		document.getElementById('footer').textContent = 'heaptrail ' + D.heaptrail + ' \u00b7 ' + D.sites.length + ' sites \u00b7 figures as printed by heaptrail report, timeline, growth, clients and frag';
		let pending = 0;
		window.addEventListener('resize', function () {
			clearTimeout(pending);
			pending = setTimeout(() => redraws.forEach(f => f()), 150);
		});
		document.body.dataset.ready = '1';
	}

	start();
})();
