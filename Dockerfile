# The sluice image: one executable, the role is the command (serve, gateway, consume, migrate).
# Node 24 LTS: Node 20 is past its end of life, and 24 decodes zstd request bodies in the worker
# thread, reusing its decoder (docs/guides/sending-data.md#compression).
FROM node:24-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
# The code stays root's and read-only to the process.
COPY . .
# glibc's mmap threshold pinned (its starting value, no longer raised as it goes): request bodies
# freed after a burst of uploads go back to the kernel (docs/guides/operating.md, Memory).
ENV SLUICE_HOST=0.0.0.0 SLUICE_DATA_DIR=/data MALLOC_MMAP_THRESHOLD_=131072
# The process runs as the base image's unprivileged `node` user (uid 1000), which owns the data
# dir; a new volume mounted there starts with this owner and mode. (Before VOLUME: changes to a
# volume path after it are discarded.)
RUN mkdir -p /data && chown node:node /data && chmod 0700 /data
VOLUME /data
USER node
EXPOSE 4317 4318 8080
ENTRYPOINT ["node", "--no-memory-reducer", "--disable-wasm-trap-handler", "bin/sluice.mjs"]
CMD ["serve"]
