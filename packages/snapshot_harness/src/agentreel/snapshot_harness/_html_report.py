"""The HTML report: one self-contained page (inline CSS and script, no network) per run.

The data (``_report_data``) is embedded as one JSON block; a small script draws it. At
load it draws, per scenario, the status, the session tree and the shared timeline (one row
per session, one bar per model call positioned by its recorded times, so concurrent calls
overlap); a session's story (messages, calls, tool calls) and the transcript are drawn
only when opened, so a report of thousands of calls loads without freezing. Every text is
set with ``textContent``: nothing from a recording is ever parsed as HTML.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentreel.snapshot_harness._report_data import ScenarioResult, report_data

_CSS = """
:root{--ok:#1a7f37;--bad:#cf222e;--mut:#57606a;--line:#d0d7de;--bg:#f6f8fa;--call:#0969da}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;
color:#1f2328;background:#fff}
header.top{padding:14px 24px;border-bottom:1px solid var(--line);background:var(--bg)}
header.top h1{font-size:18px;margin:0 0 4px}
.muted{color:var(--mut)}
main{padding:8px 24px 40px}
details.scenario{border:1px solid var(--line);border-radius:8px;margin:14px 0;overflow:hidden}
details.scenario>summary{list-style:none;cursor:pointer;padding:10px 14px;background:var(--bg);
display:flex;gap:12px;align-items:baseline}
.badge{font-weight:600;font-size:12px;padding:1px 8px;border-radius:10px;color:#fff}
.badge.passed{background:var(--ok)}.badge.failed{background:var(--bad)}
.name{font-weight:600;font-size:15px}
.body{padding:10px 14px}
h3{font-size:13px;text-transform:uppercase;letter-spacing:.04em;color:var(--mut);
margin:14px 0 6px}
.grid{display:grid;grid-template-columns:minmax(220px,300px) 1fr;border:1px solid var(--line);
border-radius:6px}
.row{display:contents}
.row>.who{padding:3px 8px;border-top:1px solid var(--line);white-space:nowrap;overflow:hidden;
text-overflow:ellipsis;cursor:pointer}
.row>.track{position:relative;border-top:1px solid var(--line);border-left:1px solid var(--line);
min-height:24px;background:repeating-linear-gradient(90deg,transparent 0 calc(10% - 1px),
#eef1f4 calc(10% - 1px) 10%)}
.row.sel>.who{background:#ddf4ff}
.axis>.who,.axis>.track{border-top:none;color:var(--mut);font-size:11px}
.tick{position:absolute;top:3px;transform:translateX(-50%);white-space:nowrap}
.row>.track{overflow:hidden;user-select:none}
.zoomed{color:var(--call)}
.span{position:absolute;top:10px;height:4px;background:#d8dee4;border-radius:2px}
.bar{position:absolute;top:4px;height:16px;min-width:3px;border-radius:3px;
background:var(--call);opacity:.85;cursor:pointer}
.bar.tool-calls{background:#8250df}.bar.error,.bar.unfinished{background:var(--bad)}
.bar:hover{opacity:1;outline:2px solid #000}
.mcp-tick{position:absolute;top:2px;height:20px;width:2px;background:#bf8700}
.kind{display:inline-block;min-width:58px;font-size:11px;color:var(--mut)}
.sid{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;color:var(--mut)}
pre{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:8px;
overflow:auto;max-height:480px;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;
white-space:pre-wrap;word-break:break-word;margin:4px 0}
pre.diff .add{color:#116329;background:#dafbe1;display:block}
pre.diff .del{color:#82071e;background:#ffebe9;display:block}
pre.diff .hunk{color:#0550ae;display:block}
pre.diff .head{font-weight:700;display:block}
.story{border-left:3px solid var(--line);padding-left:10px}
.story .item{margin:4px 0}
.story .item>pre{margin:2px 0 6px}
.problems{color:var(--bad)}
details>summary{cursor:pointer}
"""

_SCRIPT = r"""
(function(){
"use strict";
var began=performance.now();
var data=JSON.parse(document.getElementById("agentreel-data").textContent);
var parsed=performance.now();
function el(tag,cls,text){var e=document.createElement(tag);if(cls)e.className=cls;
 if(text!==undefined&&text!==null)e.textContent=String(text);return e;}
function ms(v){return (Math.round(v*10)/10)+" ms";}
function head(){var h=el("header","top");h.appendChild(el("h1",null,data.title+" report"));
 var n=data.scenarios.length;h.appendChild(el("div","muted",n+" scenario"+(n==1?"":"s")+": "+
 data.passed+" passed, "+data.failed+" failed \u00b7 generated "+data.generated));return h;}
function diffPre(text){var pre=el("pre","diff");text.split("\n").forEach(function(line){
 var c=line.indexOf("+++")===0||line.indexOf("---")===0?"head":line.charAt(0)=="@"?"hunk":
 line.charAt(0)=="+"?"add":line.charAt(0)=="-"?"del":null;
 var s=el("span",c,line+"\n");pre.appendChild(s);});return pre;}
function tree(sc,select){var root=el("ul","tree");var lists=[root];
 sc.sessions.forEach(function(s,i){var li=el("li","node");li.dataset.session=s.id;
  li.dataset.index=i;li.dataset.kind=s.kind;
  var b=el("b",null,s.label);li.appendChild(b);
  li.appendChild(document.createTextNode(" "+s.file+" \u00b7 "+s.calls.length+" call"+
   (s.calls.length==1?"":"s")+" "));li.appendChild(el("span","sid",s.id));
  Object.keys(s.extra).forEach(function(k){li.appendChild(el("span","muted"," "+k+"="+
   JSON.stringify(s.extra[k])));});
  li.addEventListener("click",function(ev){ev.stopPropagation();select(i);});
  var parentList=s.parent!==null&&lists[s.parent+1]?lists[s.parent+1]:root;
  parentList.appendChild(li);var sub=el("ul");li.appendChild(sub);lists[i+1]=sub;});
 return root;}
function timeline(sc,select,range,redraw){var grid=el("div","grid timeline");
 var t0=range?range[0]:sc.t0,span=Math.max((range?range[1]:sc.t1)-t0,1);
 function pct(t){return ((t-t0)/span*100)+"%";}
 var axis=el("div","row axis");axis.appendChild(range?el("div","who zoomed",
  "zoomed: "+ms(t0-sc.t0)+" + "+ms(span)+" (double-click: all)"):el("div","who",
  "t = 0 at "+new Date(t0).toISOString()+" (drag: zoom)"));var at=el("div","track");
 for(var k=0;k<=10;k++){var tk=el("span","tick",ms(t0-sc.t0+span*k/10));tk.style.left=(k*10)+"%";
  if(k===0)tk.style.transform="none";if(k===10)tk.style.transform="translateX(-100%)";
  at.appendChild(tk);}axis.appendChild(at);grid.appendChild(axis);
 sc.sessions.forEach(function(s,i){var row=el("div","row");row.dataset.session=s.id;
  var who=el("div","who","\u00a0".repeat(2*s.depth)+s.label+"  "+s.file);
  who.title=s.id;who.addEventListener("click",function(){select(i);});row.appendChild(who);
  var tr=el("div","track");
  if(s.start!==null&&s.end!==null){var sp=el("div","span");sp.style.left=pct(s.start);
   sp.style.width=((s.end-s.start)/span*100)+"%";tr.appendChild(sp);}
  var frag=document.createDocumentFragment();
  s.calls.forEach(function(c,j){var b=el("div","bar "+c.finish.split(":")[0]);
   b.style.left=pct(c.s);b.style.width=((c.e-c.s)/span*100)+"%";
   b.dataset.start=c.s;b.dataset.end=c.e;b.dataset.call=j;
   b.title=s.label+" call "+(j+1)+": "+ms(c.s-t0)+" \u2192 "+ms(c.e-t0)+" ("+
    ms(c.e-c.s)+") "+c.finish;
   b.addEventListener("click",function(){select(i,j);});frag.appendChild(b);});
  (s.mcp||[]).forEach(function(t){if(t===null)return;var m=el("div","mcp-tick");
   m.style.left=pct(t);m.title=s.label+": MCP call at "+ms(t-t0);frag.appendChild(m);});
  tr.appendChild(frag);row.appendChild(tr);grid.appendChild(row);});
 // Drag across a track to zoom into that time range; double-click to see the whole run.
 var from=null;
 grid.addEventListener("mousedown",function(ev){var t=ev.target.closest(".track");
  if(t){var r=t.getBoundingClientRect();from={x:ev.clientX,left:r.left,width:r.width};}});
 grid.addEventListener("mouseup",function(ev){if(!from)return;var f=from;from=null;
  if(Math.abs(ev.clientX-f.x)<6)return;
  function at(x){return t0+Math.min(Math.max((x-f.left)/f.width,0),1)*span;}
  var a=at(Math.min(f.x,ev.clientX)),b=at(Math.max(f.x,ev.clientX));redraw([a,b]);});
 grid.addEventListener("dblclick",function(){if(range)redraw(null);});
 return grid;}
function callBlock(c,j,t0){var d=el("div","item call");
 d.appendChild(el("span","kind","model"));d.appendChild(document.createTextNode("call "+(j+1)+
  " \u00b7 "+c.model+" \u00b7 "+ms(c.s-t0)+" \u2192 "+ms(c.e-t0)+" \u00b7 "+c.finish+
  " \u00b7 "+c.chunks+" chunks"+(Object.keys(c.usage).length?" \u00b7 "+
  JSON.stringify(c.usage):"")));
 if(c.reasoning)d.appendChild(el("pre","reasoning",c.reasoning));
 if(c.text)d.appendChild(el("pre","text",c.text));
 c.tools.forEach(function(t){d.appendChild(el("pre","toolcall",t.name+"("+t.arguments+")"));});
 return d;}
function story(sc,i,callIndex){var s=sc.sessions[i];var box=el("div","story");
 box.dataset.session=s.id;
 box.appendChild(el("div",null,s.label+" \u00b7 "+s.file+" \u00b7 origin "+s.origin+
  (s.spawn_index!==null?" \u00b7 spawn_index "+s.spawn_index:"")+
  (s.seed_length?" \u00b7 seed_length "+s.seed_length:"")));
 box.appendChild(el("div","sid",s.id));var target=null;
 s.story.forEach(function(it){if(it.k=="call"){var cb=callBlock(s.calls[it.i],it.i,sc.t0);
   if(it.i===callIndex)target=cb;box.appendChild(cb);return;}
  var d=el("div","item "+it.k);d.appendChild(el("span","kind",it.k));
  if(it.text.indexOf("\n")>=0||it.text.length>120){d.appendChild(el("pre",null,it.text));}
  else d.appendChild(document.createTextNode(it.text));box.appendChild(d);});
 return {box:box,target:target};}
function transcript(sc){var box=el("div","transcript");sc.transcript.forEach(function(t){
 var d=el("div","item "+t.k);d.appendChild(el("span","kind",t.k));
 if(t.text.length>120||t.k=="agent")d.appendChild(el("pre",null,t.text));
 else d.appendChild(document.createTextNode(t.text));box.appendChild(d);});return box;}
function scenario(sc){var sec=el("details","scenario");sec.open=true;
 sec.dataset.scenario=sc.name;sec.dataset.status=sc.status;var sum=el("summary");
 sum.appendChild(el("span","badge "+sc.status,sc.status=="passed"?"PASS":"FAIL"));
 sum.appendChild(el("span","name",sc.name));
 sum.appendChild(el("span","muted",sc.sessions.length+" session"+
  (sc.sessions.length==1?"":"s")+" \u00b7 "+sc.sessions.reduce(function(a,s){
  return a+s.calls.length;},0)+" model calls \u00b7 "+sc.duration+" s"));
 sec.appendChild(sum);sec.className="scenario";var body=el("div","body");sec.appendChild(body);
 if(sc.description)body.appendChild(el("div","muted",sc.description));
 if(sc.problems.length){var p=el("div","problems");sc.problems.forEach(function(x){
  p.appendChild(el("div",null,x));});body.appendChild(p);}
 if(sc.drifted){body.appendChild(el("h3",null,"re-recorded only what drifted"));
  body.appendChild(el("pre","drifted",sc.drifted));}
 if(sc.status=="failed"){body.appendChild(el("h3",null,"failure"));
  var f=el("div","failure");
  if(sc.diffs.length){sc.diffs.forEach(function(d){f.appendChild(el("div",null,d.file));
   f.appendChild(diffPre(d.text));});}else f.appendChild(el("pre",null,sc.message));
  body.appendChild(f);}
 var detail=el("div","detail");var tl;
 function select(i,j){detail.textContent="";var r=story(sc,i,j);detail.appendChild(r.box);
  selected=sc.sessions[i].id;mark();
  if(r.target)r.target.scrollIntoView({block:"nearest"});}
 var selected=null;
 function mark(){Array.prototype.forEach.call(tl.querySelectorAll(".row"),function(row){
  row.classList.toggle("sel",selected!==null&&row.dataset.session===selected);});}
 function drawTimeline(range){var fresh=timeline(sc,select,range,drawTimeline);
  if(tl)tl.replaceWith(fresh);tl=fresh;mark();}
 body.appendChild(el("h3",null,"sessions"));body.appendChild(tree(sc,select));
 body.appendChild(el("h3",null,"timeline (recorded times)"));drawTimeline(null);
 body.appendChild(tl);body.appendChild(el("h3",null,"session detail"));
 detail.appendChild(el("div","muted","click a session or a call"));body.appendChild(detail);
 var tx=el("details","transcript-box");tx.appendChild(el("summary",null,"transcript ("+
  sc.transcript.length+" entries)"));var drawn=false;
 tx.addEventListener("toggle",function(){if(tx.open&&!drawn){drawn=true;
  tx.appendChild(transcript(sc));}});body.appendChild(tx);
 if(sc.mcp&&sc.mcp.length){body.appendChild(el("h3",null,
  "MCP calls no session asked for"));var mb=el("div","story");sc.mcp.forEach(function(it){
  var d=el("div","item mcp");d.appendChild(el("span","kind","mcp"));
  d.appendChild(document.createTextNode(it.text));mb.appendChild(d);});body.appendChild(mb);}
 return sec;}
document.body.appendChild(head());var main=el("main");
data.scenarios.forEach(function(sc){main.appendChild(scenario(sc));});
document.body.appendChild(main);
// For `nox -s bench` (report): parsing the data vs drawing the page, in this load.
document.body.dataset.parseMs=String(parsed-began);
document.body.dataset.drawMs=String(performance.now()-parsed);
document.body.dataset.ready="1";
})();
"""


def render_html(data: dict[str, Any]) -> str:
    """The page for ``report_data``'s document: everything inline, nothing fetched."""
    # `<` escaped everywhere in the JSON: no `</script>` inside a recording can end the block.
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    title = json.dumps(data.get("title", "agentreel"))[1:-1].replace("<", "&lt;")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
        f"<title>{title} report</title><style>{_CSS}</style></head><body>"
        f'<script type="application/json" id="agentreel-data">{payload}</script>'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )


def write_report(
    path: Path, results: Iterable[ScenarioResult], *, title: str = "agentreel"
) -> Path:
    """Write the report of ``results`` to ``path`` (atomically); returns the path."""
    text = render_html(report_data(results, title=title))
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)
    return path
