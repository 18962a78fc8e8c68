// A language model of our own for the tests (AI SDK LanguageModelV2 shape,
// which Mastra's Agent accepts): each turn it asks for one executeCode call
// with the code the test scripted, then answers with what the tool showed it.
// No model service is called.
type Step = { code: string; language?: "python" | "javascript"; files?: { path: string; content: string }[] };

export interface ScriptedModel {
  model: unknown;
  /** Queue the tool call of the next turn. */
  next(step: Step): void;
  /** The tool outputs the model was shown, in order (Mastra's toModelOutput text). */
  seen: string[];
}

export function scriptedModel(): ScriptedModel {
  const queue: Step[] = [];
  const seen: string[] = [];
  let n = 0;
  const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };
  const model = {
    specificationVersion: "v2",
    provider: "scripted",
    modelId: "scripted-executeCode",
    supportedUrls: {},
    async doGenerate(opts: { prompt: { role: string; content: unknown }[] }) {
      const last = opts.prompt[opts.prompt.length - 1];
      if (last.role === "tool") {
        const parts = last.content as { output: { type: string; value: unknown } }[];
        const text = parts
          .map((p) => (typeof p.output.value === "string" ? p.output.value : JSON.stringify(p.output.value)))
          .join("\n");
        seen.push(text);
        return { content: [{ type: "text", text }], finishReason: "stop", usage, warnings: [] };
      }
      const step = queue.shift();
      if (!step) throw new Error("scripted model: no step queued for this turn");
      return {
        content: [
          {
            type: "tool-call",
            toolCallId: `call-${++n}`,
            toolName: "executeCode",
            input: JSON.stringify({ language: "python", ...step }),
          },
        ],
        finishReason: "tool-calls",
        usage,
        warnings: [],
      };
    },
    async doStream(): Promise<never> {
      throw new Error("scripted model: only generate() is scripted");
    },
  };
  return { model, next: (s) => queue.push(s), seen };
}
