// The benchmark's StateGraph, shared by langgraph.mjs, profile.mjs and wal.mjs: a turn is a user
// message in, an agent message out and two small channels (step, mood) set.
import { Annotation, StateGraph, START, END } from "@langchain/langgraph";

const State = Annotation.Root({
  messages: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  step: Annotation(),
  mood: Annotation(),
});

export function buildGraph(checkpointer) {
  return new StateGraph(State)
    .addNode("agent", (s) => ({ messages: [{ role: "ai", content: `reply ${s.messages.length}: noted, thank you` }],
      step: s.messages.length, mood: s.messages.length % 2 ? "calm" : "busy" }))
    .addEdge(START, "agent").addEdge("agent", END)
    .compile({ checkpointer });
}
