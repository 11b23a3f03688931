// The napkin calculator of napkin.md: the book's decode arithmetic, run in the page.
// The formulas mirror floorlab.core.shapes and floorlab.core.roofline line for line; the
// shapes and the presets come from napkin-data.js, which the site's build writes from the
// library (floorlab.tools.napkin). Nothing is fetched: the page works from a file, offline.
(function () {
  "use strict";

  // ---- core.shapes and core.roofline, in JavaScript ----------------------------------
  const BYTES_PER_GB = 1e9;
  const DTYPE_BYTES = 2; // bf16

  function layerParamCount(s) { // Qwen3Shape.layer_param_count
    const h = s.hidden_size, d = s.head_dim;
    const attention = h * (s.num_heads + 2 * s.num_kv_heads) * d + s.num_heads * d * h;
    const mlp = 3 * h * s.intermediate_size;
    const norms = 2 * h + 2 * d;
    return attention + mlp + norms;
  }

  function paramCount(s) { // Qwen3Shape.param_count: a tied table counts once
    const embed = s.vocab_size * s.hidden_size;
    const head = s.tie_word_embeddings ? 0 : embed;
    return embed + s.num_layers * layerParamCount(s) + s.hidden_size + head;
  }

  function streamedWeightBytes(s, batch) { // Qwen3Shape.streamed_weight_bytes
    const weights = paramCount(s) * DTYPE_BYTES;
    if (s.tie_word_embeddings) return weights;
    const table = s.vocab_size * s.hidden_size * DTYPE_BYTES;
    return weights - table + batch * s.hidden_size * DTYPE_BYTES;
  }

  function kvBytesPerToken(s) { // Qwen3Shape.kv_bytes_per_token
    return s.num_layers * 2 * s.num_kv_heads * s.head_dim * DTYPE_BYTES;
  }

  function bytesPerStep(s, batch, contextLen) { // roofline.bytes_per_step
    return streamedWeightBytes(s, batch) + batch * contextLen * kvBytesPerToken(s);
  }

  function floorMs(bytes, gbps) { // roofline.floor_ms
    return bytes / (gbps * BYTES_PER_GB) * 1e3;
  }

  function predictedMs(floor, kernels, overheadUs) { // roofline.predicted_ms
    return floor + kernels * overheadUs / 1e3;
  }

  // One step by the book's rules: decode_floor counts the tokens in the cache plus the one
  // being decoded; each path costs the floor plus its kernels at its price per kernel.
  function napkin(inp) {
    const visible = inp.context + 1;
    const weights = streamedWeightBytes(inp.shape, inp.batch);
    const bytes = bytesPerStep(inp.shape, inp.batch, visible);
    const floor = floorMs(bytes, inp.bandwidth);
    const kernels = inp.kernelsPerLayer * inp.shape.num_layers;
    const eager = predictedMs(floor, kernels, inp.dispatchUs);
    const replay = predictedMs(floor, kernels, inp.replayUs);
    return {
      visible, weights, kv: bytes - weights, bytes, floor, kernels, eager, replay,
      eagerMultiple: eager / floor, replayMultiple: replay / floor,
      eagerOffBus: (eager - floor) / eager, replayOffBus: (replay - floor) / replay,
    };
  }

  // ---- numbers as the book prints them (core.prose) ----------------------------------
  function sig(v, digits = 3) {  // as core.prose.sig: three figures, never scientific notation
    if (v === 0) return "0";
    if (!isFinite(v)) return "—";
    const exponent = Math.floor(Math.log10(Math.abs(v)));
    const decimals = digits - 1 - exponent;
    if (decimals >= 0) {
      let text = v.toFixed(decimals);
      if (Math.abs(parseFloat(text)) >= 10 ** (exponent + 1) && decimals > 0) text = v.toFixed(decimals - 1);
      return text;
    }
    const unit = 10 ** -decimals;
    return (Math.round(v / unit) * unit).toFixed(0);
  }
  const fmtMs = (ms) => `${sig(ms)} ms`;
  const fmtGbps = (g) => `${sig(g)} GB/s`;
  const fmtTimes = (r) => `${sig(r)}×`;
  const fmtShare = (x) => `${(x * 100).toFixed(0)}%`;
  const fmtGb = (b) => `${sig(b / BYTES_PER_GB)} GB`;
  const fmtCount = (n) => (Number.isInteger(n) ? String(n) : sig(n, 3));

  // ---- the form ------------------------------------------------------------------------
  const SHAPE_FIELDS = [
    ["num_layers", "layers"], ["hidden_size", "hidden size"],
    ["intermediate_size", "MLP size"], ["num_heads", "query heads"],
    ["num_kv_heads", "KV heads"], ["head_dim", "head size"], ["vocab_size", "vocabulary"],
  ];
  // kind: "whole" (a whole number of at least min), "positive" (above 0) or "nonnegative"
  const field = (id, label, unit, kind, min, hint) => ({id, label, unit, kind, min, hint});
  const RUN_FIELDS = [
    field("batch", "batch", "rows", "whole", 1, "rows decoded together"),
    field("context", "context", "tokens", "whole", 0, "already in the cache; the step adds one"),
  ];
  const MACHINE_FIELDS = [
    field("bandwidth", "read bandwidth", "GB/s", "positive", 0, "what the floor divides by"),
    field("kernelsPerLayer", "kernels per layer", "", "nonnegative", 0, "launches ÷ layers"),
    field("dispatchUs", "dispatch per launch", "µs", "nonnegative", 0, "eager: the host's price"),
    field("replayUs", "replay per kernel", "µs", "nonnegative", 0, "replay: the device's price"),
  ];
  const SHAPE_INPUTS = SHAPE_FIELDS.map(([key, label]) => field(`shape-${key}`, label, "", "whole", 1, ""));
  const WANTED = {positive: "a number above 0", nonnegative: "a number of 0 or more"};

  // one click each: the questions the page opens with
  const WHAT_IFS = [
    ["bandwidth", "twice the bandwidth"],
    ["kernels", "a tenth of the kernels"],
    ["model", "the next model up"],
  ];

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "text") node.textContent = v;
      else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c);
    return node;
  }

  function numberField(f) {
    const input = el("input", {
      id: `napkin-${f.id}`, type: "number", min: String(f.min), step: f.kind === "whole" ? "1" : "any",
      inputmode: f.kind === "whole" ? "numeric" : "decimal", required: "",
    });
    const head = el("span", {class: "napkin-label"}, f.label,
                    f.unit ? el("span", {class: "napkin-unit", text: ` ${f.unit}`}) : "");
    const label = el("label", {class: "napkin-field", for: input.id}, head, input);
    if (f.hint) {
      input.setAttribute("aria-describedby", `napkin-${f.id}-hint`);
      label.append(el("span", {class: "napkin-hint", id: `napkin-${f.id}-hint`, text: f.hint}));
    }
    return label;
  }

  function build(root, data) {
    root.replaceChildren();
    const presetBox = el("div", {class: "napkin-presets", role: "group", "aria-label": "Start from a run"});
    presetBox.append(el("span", {class: "napkin-presets-head", text: "Start from"}));
    for (const p of data.presets) {
      presetBox.append(el("button", {type: "button", class: "napkin-preset", "data-preset": p.key,
                                     "aria-pressed": "false", text: p.label}));
    }
    const source = el("p", {class: "napkin-source", id: "napkin-source"});

    const model = el("select", {id: "napkin-model"});
    for (const name of Object.keys(data.shapes)) model.append(el("option", {value: name, text: name}));
    model.append(el("option", {value: "custom", text: "custom (the sizes below)"}));
    const shapeGrid = el("div", {class: "napkin-shape"});
    for (const f of SHAPE_INPUTS) shapeGrid.append(numberField(f));
    const tied = el("input", {id: "napkin-shape-tie_word_embeddings", type: "checkbox"});
    shapeGrid.append(el("label", {class: "napkin-check", for: tied.id}, tied,
                        " input table tied to the output head"));
    const shapeBox = el("details", {class: "napkin-shape-box"},
                        el("summary", {text: "the model's sizes"}), shapeGrid);

    const modelSet = el("fieldset", {class: "napkin-set"}, el("legend", {text: "The step"}),
                        el("label", {class: "napkin-field", for: model.id},
                           el("span", {class: "napkin-label", text: "model"}), model,
                           el("span", {class: "napkin-hint", text: "or type its sizes below"})));
    for (const f of RUN_FIELDS) modelSet.append(numberField(f));
    modelSet.append(shapeBox);
    const machineSet = el("fieldset", {class: "napkin-set"}, el("legend", {text: "The machine"}));
    for (const f of MACHINE_FIELDS) machineSet.append(numberField(f));
    const form = el("form", {class: "napkin-form", id: "napkin-form", novalidate: ""}, modelSet, machineSet);
    form.addEventListener("submit", (e) => e.preventDefault());

    const out = (id, label) => el("div", {class: "napkin-out"},
                                  el("span", {class: "napkin-out-label", text: label}),
                                  el("output", {id: `napkin-out-${id}`, for: "napkin-form"}),
                                  el("span", {class: "napkin-out-sub", id: `napkin-out-${id}-sub`}));
    const outputs = el("div", {class: "napkin-outputs", role: "status", "aria-live": "polite"},
                       out("floor", "floor"), out("eager", "eager"), out("replay", "replay"));
    const whatIfs = el("div", {class: "napkin-presets napkin-whatifs", role: "group", "aria-label": "What if"});
    whatIfs.append(el("span", {class: "napkin-presets-head", text: "What if"}));
    for (const [key, label] of WHAT_IFS) {
      whatIfs.append(el("button", {type: "button", class: "napkin-whatif", "data-whatif": key, text: label}));
    }
    const problems = el("p", {class: "napkin-problems", id: "napkin-problems", role: "alert"});
    const figure = el("figure", {class: "napkin-figure"});
    root.append(presetBox, source, form, whatIfs, problems, outputs, figure);
    return {model, figure, source, problems};
  }

  // ---- the stacked bar -------------------------------------------------------------------
  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs = {}, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function niceStep(max) {
    const raw = max / 5;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  }

  function drawBar(figure, r) {
    // drawn at the figure's own width, so its text stays at the page's size on a phone too
    const W = Math.max(300, Math.round(figure.clientWidth || 640));
    const narrow = W < 520;
    const left = narrow ? 62 : 96, right = 20, top = narrow ? 52 : 34, barH = 34, gap = 18;
    const bars = [["eager", r.eager, "napkin-bar-eager"], ["replay", r.replay, "napkin-bar-replay"]];
    const H = top + bars.length * (barH + gap) + 44;
    const max = Math.max(r.eager, r.replay);
    const step = niceStep(max);
    const end = Math.ceil(max / step - 1e-9) * step;
    const x = (ms) => left + (W - left - right) * ms / end;
    const root = svg("svg", {viewBox: `0 0 ${W} ${H}`, class: "napkin-bar", role: "img",
                             "aria-labelledby": "napkin-bar-title"});
    root.append(svg("title", {id: "napkin-bar-title"},
                    `One decode token: eager ${fmtMs(r.eager)}, replayed ${fmtMs(r.replay)}, ` +
                    `of which ${fmtMs(r.floor)} is the floor`));
    // legend
    const second = narrow ? [left, 26] : [left + 228, 8];
    root.append(svg("rect", {x: left, y: 8, width: 12, height: 12, class: "napkin-floor"}));
    root.append(svg("text", {x: left + 18, y: 18, class: "napkin-legend"}, "the floor: reading the bytes"));
    root.append(svg("rect", {x: second[0], y: second[1], width: 12, height: 12, class: "napkin-rest"}));
    root.append(svg("text", {x: second[0] + 18, y: second[1] + 10, class: "napkin-legend"},
                    "every kernel at its price"));
    const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
    for (let i = 0; i * step <= end + 1e-9; i++) {
      const tx = x(i * step);
      root.append(svg("line", {x1: tx, x2: tx, y1: top - 4, y2: H - 40, class: "napkin-grid"}));
      root.append(svg("text", {x: tx, y: H - 24, class: "napkin-tick", "text-anchor": "middle"},
                      (i * step).toFixed(decimals)));
    }
    root.append(svg("text", {x: left + (W - left - right) / 2, y: H - 4, class: "napkin-tick",
                             "text-anchor": "middle"}, "time per decode token (ms)"));
    bars.forEach(([label, ms, cls], i) => {
      const y = top + i * (barH + gap);
      const g = svg("g", {class: cls, "data-ms": String(ms)});
      g.append(svg("text", {x: left - 10, y: y + barH / 2 + 5, class: "napkin-bar-label",
                            "text-anchor": "end"}, label));
      const fw = Math.max(x(r.floor) - left, 1);
      const rw = Math.max(x(ms) - x(r.floor), 0);
      g.append(svg("rect", {x: left, y, width: fw, height: barH, class: "napkin-floor"}));
      g.append(svg("rect", {x: left + fw, y, width: rw, height: barH, class: "napkin-rest"}));
      const ratio = `${fmtMs(ms)}, ${fmtTimes(ms / r.floor)}`;
      const inside = rw > 150 || x(ms) + 150 > W;
      g.append(svg("text", {x: inside ? left + fw + rw - 8 : left + fw + rw + 6, y: y + barH / 2 + 5,
                            class: inside ? "napkin-bar-value napkin-on-bar" : "napkin-bar-value",
                            "text-anchor": inside ? "end" : "start"}, ratio));
      root.append(g);
    });
    figure.replaceChildren(root);
  }

  // ---- reading and writing the form ------------------------------------------------------
  const $ = (id) => document.getElementById(`napkin-${id}`);

  function readShape() {
    const s = {};
    for (const [key] of SHAPE_FIELDS) s[key] = Number($(`shape-${key}`).value);
    s.tie_word_embeddings = $("shape-tie_word_embeddings").checked;
    return s;
  }

  function writeShape(s) {
    for (const [key] of SHAPE_FIELDS) $(`shape-${key}`).value = String(s[key]);
    $("shape-tie_word_embeddings").checked = Boolean(s.tie_word_embeddings);
  }

  function sameShape(a, b) {
    return SHAPE_FIELDS.every(([k]) => a[k] === b[k]) && a.tie_word_embeddings === b.tie_word_embeddings;
  }

  // The inputs as numbers, and one sentence for each that no step can have.
  function readInputs() {
    const problems = [];
    const take = (f) => {
      const input = $(f.id);
      const v = input.value.trim() === "" ? NaN : Number(input.value);
      const bad = !isFinite(v) || v < f.min || (f.kind === "whole" && !Number.isInteger(v)) ||
                  (f.kind === "positive" && v <= 0);
      input.setAttribute("aria-invalid", bad ? "true" : "false");
      if (bad) problems.push(`${f.label}: type ${WANTED[f.kind] || `a whole number of ${f.min} or more`}.`);
      return v;
    };
    const inp = {};
    for (const f of RUN_FIELDS.concat(MACHINE_FIELDS)) inp[f.id] = take(f);
    const shape = {};
    SHAPE_FIELDS.forEach(([key], i) => { shape[key] = take(SHAPE_INPUTS[i]); });
    shape.tie_word_embeddings = $("shape-tie_word_embeddings").checked;
    inp.shape = shape;
    if (!problems.length && !isFinite(napkin(inp).eager)) {
      problems.push("These numbers overflow: try a smaller model or a larger bandwidth.");
    }
    return {inp, problems};
  }

  function main() {
    const root = document.getElementById("napkin");
    const data = window.FLOORLAB_NAPKIN;
    if (!root) return;
    if (!data) {
      root.textContent = "The calculator's numbers (napkin-data.js) did not load; build the site " +
                         "with jupyter-book build . to write them.";
      return;
    }
    const ui = build(root, data);
    let active = null;

    function describeSource() {
      ui.source.textContent = active ? active.note : "";
    }

    function update() {
      const {inp, problems} = readInputs();
      const match = Object.entries(data.shapes).find(([, s]) => sameShape(s, inp.shape));
      ui.model.value = match ? match[0] : "custom";
      ui.problems.textContent = problems.join(" ");
      const outs = ["floor", "eager", "replay"];
      if (problems.length) {
        for (const o of outs) {
          $(`out-${o}`).textContent = "—";
          $(`out-${o}-sub`).textContent = "";
          $(`out-${o}`).removeAttribute("data-ms");
        }
        ui.figure.classList.add("napkin-stale");
        return;
      }
      ui.figure.classList.remove("napkin-stale");
      const r = napkin(inp);
      const kernels = fmtCount(r.kernels);
      const set = (id, text, sub, values) => {
        const node = $(`out-${id}`);
        node.textContent = text;
        for (const [k, v] of Object.entries(values)) node.dataset[k] = String(v);
        $(`out-${id}-sub`).textContent = sub;
      };
      set("floor", fmtMs(r.floor),
          `${fmtGb(r.bytes)} ÷ ${fmtGbps(inp.bandwidth)}\nweights ${fmtGb(r.weights)}\n` +
          `KV ${fmtGb(r.kv)} (${inp.batch} × ${r.visible} tokens)`,
          {ms: r.floor, bytes: r.bytes});
      set("eager", `${fmtTimes(r.eagerMultiple)} the floor`,
          `${fmtMs(r.eager)} per token\n= floor + ${kernels} × ${sig(inp.dispatchUs)} µs\n` +
          `${fmtShare(r.eagerOffBus)} of it not on the bus`,
          {ms: r.eager, multiple: r.eagerMultiple, offBus: r.eagerOffBus});
      set("replay", `${fmtTimes(r.replayMultiple)} the floor`,
          `${fmtMs(r.replay)} per token\n= floor + ${kernels} × ${sig(inp.replayUs)} µs\n` +
          `${fmtShare(r.replayOffBus)} of it not on the bus`,
          {ms: r.replay, multiple: r.replayMultiple, offBus: r.replayOffBus});
      drawBar(ui.figure, r);
    }

    function choose(p) {
      active = p;
      writeShape(data.shapes[p.model]);
      $("batch").value = String(p.batch);
      $("context").value = String(p.context_tokens);
      $("bandwidth").value = sig(p.bandwidth_gbps, 4);
      $("kernelsPerLayer").value = sig(p.kernels_per_layer, 4);
      $("dispatchUs").value = sig(p.dispatch_us, 3);
      $("replayUs").value = sig(p.replay_us === null ? p.dispatch_us : p.replay_us, 3);
      for (const b of root.querySelectorAll(".napkin-preset")) {
        b.setAttribute("aria-pressed", b.dataset.preset === p.key ? "true" : "false");
      }
      describeSource();
      update();
    }

    root.addEventListener("click", (e) => {
      const button = e.target.closest(".napkin-preset");
      if (button) choose(data.presets.find((p) => p.key === button.dataset.preset));
    });
    function whatIf(key) {
      if (key === "bandwidth") $("bandwidth").value = sig(Number($("bandwidth").value) * 2, 4);
      if (key === "kernels") $("kernelsPerLayer").value = sig(Number($("kernelsPerLayer").value) / 10, 4);
      if (key === "model") {
        const params = (name) => paramCount(data.shapes[name]);
        const now = paramCount(readShape());
        const next = Object.keys(data.shapes).sort((a, b) => params(a) - params(b)).find((n) => params(n) > now);
        if (next) writeShape(data.shapes[next]);
      }
      root.querySelector("form").dispatchEvent(new Event("input", {bubbles: true}));
    }

    root.addEventListener("click", (e) => {
      const button = e.target.closest(".napkin-whatif");
      if (button) whatIf(button.dataset.whatif);
    });
    ui.model.addEventListener("change", () => {
      if (data.shapes[ui.model.value]) writeShape(data.shapes[ui.model.value]);
      update();
    });
    root.querySelector("form").addEventListener("input", (e) => {
      if (e.target === ui.model) return;
      if (active && ui.source.textContent === active.note) {
        ui.source.textContent += " Some inputs are now yours.";
      }
      update();
    });
    let width = root.clientWidth;
    window.addEventListener("resize", () => {
      if (root.clientWidth !== width) { width = root.clientWidth; update(); }
    });
    choose(data.presets[0]);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
