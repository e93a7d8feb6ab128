// A small StateGraph with an interrupt, shared by graph.test.ts and the process that resumes it.
import { Annotation, END, START, StateGraph, interrupt } from "@langchain/langgraph";

const State = Annotation.Root({
  messages: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  approved: Annotation(),
});

export function buildGraph(checkpointer) {
  return new StateGraph(State)
    .addNode("draft", () => ({ messages: ["draft: cancel order 42"] }))
    .addNode("ask", () => {
      const answer = interrupt({ question: "Cancel order 42?" });
      return { approved: answer === "yes", messages: [`user said ${answer}`] };
    })
    .addNode("act", (s) => ({ messages: [s.approved ? "cancelled" : "kept"] }))
    .addEdge(START, "draft")
    .addEdge("draft", "ask")
    .addEdge("ask", "act")
    .addEdge("act", END)
    .compile({ checkpointer });
}
