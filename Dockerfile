# The sluice image: one executable, the role is the command (serve, gateway, consume, migrate).
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
ENV SLUICE_HOST=0.0.0.0 SLUICE_DATA_DIR=/data
VOLUME /data
EXPOSE 4317 4318 8080
ENTRYPOINT ["node", "bin/sluice.mjs"]
CMD ["serve"]
