// flamegraph.js - what makes nupp-bpf's SVG flame graphs interactive.
//
// flamegraph.c writes it into every SVG, after the frames: the file stays
// one file that any browser opens. Each frame is a <g class="f"> holding a
// <title>, a <rect> and a <text>, with its full name (data-n), its offset
// and width in samples from the left of the graph (data-o, data-s), its
// level from the root (data-l) and its samples by VM state (data-st,
// "compiled,interpreted,C,GC,compiling"). Layout works in samples, not
// pixels, so that zooming in is exact at any depth. Click a frame to zoom
// to it, click the root or "Reset zoom" to zoom out; "Search" (or Ctrl-F,
// or "/") highlights the frames whose names match a regular expression and
// says what share of the samples they hold; Escape resets both. Hovering a
// frame shows its samples and VM-state split below the graph.
(function () {
	"use strict";
	var doc = document, area = doc.getElementById("frames");
	var X0 = +area.getAttribute("data-x"), W = +area.getAttribute("data-w");
	var TOTAL = +area.getAttribute("data-total");
	var UNIT = area.getAttribute("data-unit") || "samples";	// what a count is
	var STATES = ["compiled", "interpreted", "C", "GC", "compiling"];
	var frames = Array.prototype.slice.call(area.getElementsByTagName("g"));
	var details = doc.getElementById("details"), hint = details.textContent;
	var matched = doc.getElementById("matched"), searchBtn = doc.getElementById("search");
	var unzoomBtn = doc.getElementById("unzoom");
	var charW = measure(), zoomed = null, pattern = null;

	function attr(g, k) {
		return g.getAttribute("data-" + k);
	}

	// The width of one character of the frames' font, in px.
	function measure() {
		var t = doc.createElementNS("http://www.w3.org/2000/svg", "text");
		var w;

		t.setAttribute("class", "probe");
		t.textContent = "mmmmmmmmmmmmmmmmmmmm";
		area.appendChild(t);
		w = t.getComputedTextLength() / 20;
		area.removeChild(t);
		return w > 0 ? w : 7.2;
	}

	// As much of name as fits in w px; a cut name ends in "..".
	function fit(name, w) {
		var n = Math.floor((w - 6) / charW);

		if (name.length <= n)
			return name;
		return n >= 3 ? name.slice(0, n - 2) + ".." : "";
	}

	function pct(n, of) {
		return (100 * n / of).toFixed(1) + "%";
	}

	// Place frame g for the zoom: inside the zoomed frame it scales, an
	// ancestor spans the width, anything else is hidden.
	function place(g) {
		var o = +attr(g, "o"), s = +attr(g, "s"), l = +attr(g, "l");
		var z = zoomed || { o: 0, s: TOTAL, l: 0 }, x, w;
		var rect = g.getElementsByTagName("rect")[0], text = g.getElementsByTagName("text")[0];

		if (l >= z.l && o >= z.o && o + s <= z.o + z.s) {
			x = X0 + (o - z.o) * W / z.s;
			w = s * W / z.s;
		} else if (l < z.l && o <= z.o && o + s >= z.o + z.s) {
			x = X0;
			w = W;
		} else {
			g.style.display = "none";
			return;
		}
		g.style.display = "";
		g.classList.toggle("anc", l < z.l);
		rect.setAttribute("x", x.toFixed(2));
		rect.setAttribute("width", w.toFixed(2));
		text.setAttribute("x", (x + 3).toFixed(2));
		text.textContent = fit(attr(g, "n"), w);
	}

	function layout() {
		frames.forEach(place);
		unzoomBtn.style.display = zoomed ? "" : "none";
	}

	function zoom(g) {
		zoomed = +attr(g, "l") === 0 ? null :
			{ o: +attr(g, "o"), s: +attr(g, "s"), l: +attr(g, "l") };
		layout();
	}

	// Samples under the matched frames, each counted once: a match inside
	// another is already in it (frames are sorted by offset, then level).
	function matchedSamples(hits) {
		var end = -1, n = 0;

		hits.sort(function (a, b) {
			return a.o - b.o || a.l - b.l;
		});
		hits.forEach(function (h) {
			if (h.o >= end) {
				n += h.s;
				end = h.o + h.s;
			}
		});
		return n;
	}

	function search(p) {
		var re, hits = [];

		try {
			re = new RegExp(p);
		} catch (e) {
			matched.textContent = "Not a regular expression: " + p;
			return;
		}
		pattern = p;
		frames.forEach(function (g) {
			var hit = re.test(attr(g, "n"));

			g.classList.toggle("hit", hit);
			if (hit)
				hits.push({ o: +attr(g, "o"), s: +attr(g, "s"), l: +attr(g, "l") });
		});
		matched.textContent = "Matched " + pct(matchedSamples(hits), TOTAL) + " of the " + UNIT + ": /" +
			p + "/";
		searchBtn.textContent = "Reset search";
	}

	function clearSearch() {
		pattern = null;
		frames.forEach(function (g) {
			g.classList.remove("hit");
		});
		matched.textContent = "";
		searchBtn.textContent = "Search";
	}

	function askSearch() {
		var p;

		if (pattern !== null)
			return clearSearch();
		p = window.prompt("Search frames (a regular expression):", "");
		if (p)
			search(p);
	}

	// A frame's VM-state split as the bar below the graph; its words.
	function split(g) {
		var st = attr(g, "st").split(",").map(Number), s = +attr(g, "s");
		var words = [], x = 0;

		STATES.forEach(function (name, i) {
			var bar = doc.getElementById("split-" + i), w = s ? 120 * st[i] / s : 0;

			bar.setAttribute("x", (X0 + x).toFixed(2));
			bar.setAttribute("width", w.toFixed(2));
			x += w;
			if (st[i])
				words.push(name + " " + pct(st[i], s));
		});
		return words.join(", ");
	}

	// The hovered frame's samples and VM-state split, in words and as a bar.
	function show(g) {
		var s = +attr(g, "s"), words = split(g);

		details.textContent = attr(g, "n") + ": " + s + " " + UNIT + " (" + pct(s, TOTAL) + ")" +
			(words ? ", " + words : "");
	}

	// Nothing hovered: the whole profile's split, and how to use the graph.
	function unshow() {
		if (frames.length)
			split(frames[0]);
		details.textContent = hint;
	}

	function frameOf(e) {
		return e.target.closest ? e.target.closest("g.f") : null;
	}

	area.addEventListener("click", function (e) {
		var g = frameOf(e);

		if (g)
			zoom(g);
	});
	area.addEventListener("mouseover", function (e) {
		var g = frameOf(e);

		if (g)
			show(g);
	});
	area.addEventListener("mouseout", unshow);
	unzoomBtn.addEventListener("click", function () {
		zoomed = null;
		layout();
	});
	searchBtn.addEventListener("click", askSearch);
	window.addEventListener("keydown", function (e) {
		if ((e.ctrlKey && e.key === "f") || e.key === "/") {
			e.preventDefault();
			clearSearch();
			askSearch();
		} else if (e.key === "Escape") {
			clearSearch();
			zoomed = null;
			layout();
		}
	});
	layout();
	unshow();
})();
