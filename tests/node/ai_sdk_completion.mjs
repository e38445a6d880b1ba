// Calls agentd's POST /v1/completions through the AI SDK's OpenAI provider `.completion()` model
// (generateText, then streamText) and prints what each got, as JSON.
// Usage: AGENTD_KEY=KEY node ai_sdk_completion.mjs BASE_URL MODEL
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";

const [base, model] = process.argv.slice(2);
const openai = createOpenAI({ baseURL: `${base}/v1`, apiKey: process.env.AGENTD_KEY });

const generated = await generateText({
  model: openai.completion(model),
  prompt: "What is the capital of France?",
  maxRetries: 0,
});

const errors = [];
const streamed = streamText({
  model: openai.completion(model),
  prompt: "Count to three.",
  maxRetries: 0,
  onError: ({ error }) => errors.push(String(error)),
});
let text = "";
for await (const delta of streamed.textStream) {
  text += delta;
}

console.log(
  JSON.stringify({
    generated: {
      text: generated.text,
      finishReason: generated.finishReason,
      inputTokens: generated.usage.inputTokens,
      outputTokens: generated.usage.outputTokens,
    },
    streamed: { text, finishReason: await streamed.finishReason, errors },
  }),
);
