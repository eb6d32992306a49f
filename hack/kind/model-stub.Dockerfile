# The model stub (hack/model-stub) as an image, standing in for the model vendor in a kind cluster.
# Development only: it runs from source through tsx. Built by hack/kind-up.sh from the repository root.
ARG NODE_IMAGE=node:20.19.5-bookworm-slim
FROM ${NODE_IMAGE}
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY hack/model-stub ./hack/model-stub
USER 1000:1000
EXPOSE 8788
ENTRYPOINT ["node", "--import", "tsx", "hack/model-stub/main.ts", "--host", "0.0.0.0", "--port", "8788"]
